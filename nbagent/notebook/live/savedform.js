// nbagent saved form: what a live output is saved as (see nbagent/notebook/savedform.py).
// JupyterLab saves a widget output as a reference to a model only the running kernel holds:
// reopened, it reads "Error displaying widget: model not found". While this page shows a live
// output, the notebook it belongs to is saved with that output replaced by ``saved`` (plain,
// sanitized outputs the kernel keeps current), and the live view stays on the page.
//
// Three things, in the page of the notebook that shows the output (``view_id``):
// - saving: the notebook model's toJSON (what every save, save-as and checkpoint writes) puts
//   ``saved`` in place of each output that shows ``view_id``;
// - a reload while it lives (``ended`` false, ``restore`` true): the page opened the saved
//   form (it carries ``key`` in its metadata); the live view is put back in its place;
// - its end (``ended``): an output still showing the view or the saved form (a page reloaded
//   since it started never gets the kernel's display update) becomes ``saved``, now final.

const VIEW = "application/vnd.jupyter.widget-view+json";
const forms = new WeakMap(); // notebook model -> Map(view_id -> widget model)

function contextOf(model) {
  const manager = model.widget_manager;
  return (manager && (manager.context || manager._context)) || null;
}

function notebookOf(model) {
  const context = contextOf(model);
  const notebook = context && context.model;
  return notebook && notebook.cells && typeof notebook.toJSON === "function" ? notebook : null;
}

// The saved form as one nbformat output, or null while the kernel has given none.
function savedOutput(model) {
  const saved = model.get("saved");
  if (!saved || typeof saved.data !== "object" || !saved.data) return null;
  return { output_type: "display_data", data: saved.data, metadata: saved.metadata || {} };
}

function shownView(output) {
  const data = (output && output.data) || {};
  const shown = data[VIEW];
  return shown && typeof shown.model_id === "string" ? shown.model_id : null;
}

function savedKey(output) {
  const mine = ((output && output.metadata) || {}).nbagent;
  return mine && typeof mine === "object" && typeof mine.saved_live === "string"
    ? mine.saved_live
    : null;
}

// Each saved output that shows a registered live view becomes that view's saved form.
function substitute(json, live) {
  for (const cell of (json && json.cells) || []) {
    if (!Array.isArray(cell.outputs)) continue;
    cell.outputs = cell.outputs.map((output) => {
      const model = live.get(shownView(output));
      return (model && savedOutput(model)) || output;
    });
  }
  return json;
}

function install(notebook) {
  let live = forms.get(notebook);
  if (live) return live;
  live = new Map();
  forms.set(notebook, live);
  const original = notebook.toJSON;
  const registered = live;
  notebook.toJSON = function (...args) {
    const json = original.apply(this, args);
    try {
      return substitute(json, registered);
    } catch (error) {
      console.warn("nbagent: a live output is saved as it is", error);
      return json;
    }
  };
  return live;
}

// Replace, in every cell, each output that ``test`` picks by what ``made()`` makes of it.
function replaceIn(notebook, test, made) {
  for (let i = 0; i < notebook.cells.length; i++) {
    const cell = notebook.cells.get(i);
    if (!cell || !cell.outputs) continue;
    for (let j = 0; j < cell.outputs.length; j++) {
      const current = cell.outputs.get(j).toJSON();
      const output = test(current) ? made(current) : null;
      if (output) cell.outputs.set(j, output);
    }
  }
}

function restoreLive(model, notebook) {
  const key = model.get("key");
  const view = model.get("view_id");
  if (!key || !view || model.get("ended") || !model.get("restore")) return;
  replaceIn(
    notebook,
    (output) => savedKey(output) === key,
    (output) => ({
      output_type: "display_data",
      data: {
        [VIEW]: { version_major: 2, version_minor: 0, model_id: view },
        "text/plain": (output.data && output.data["text/plain"]) || "",
      },
      metadata: {},
    }),
  );
}

function finish(model, notebook) {
  const key = model.get("key");
  const view = model.get("view_id");
  const saved = savedOutput(model);
  if (!saved) return;
  replaceIn(
    notebook,
    (output) => (view && shownView(output) === view) || (key && savedKey(output) === key),
    () => saved,
  );
}

async function initialize({ model }) {
  try {
    const context = contextOf(model);
    if (context && context.ready) await context.ready;
    const notebook = notebookOf(model);
    if (!notebook) return;
    const live = install(notebook);
    const register = () => {
      const view = model.get("view_id");
      if (view) live.set(view, model);
    };
    register();
    model.on("change:view_id", register);
    if (model.get("ended")) finish(model, notebook);
    else restoreLive(model, notebook);
    model.on("change:ended", () => {
      if (model.get("ended")) finish(model, notebook);
    });
  } catch (error) {
    console.warn("nbagent: no saved form for this output", error);
  }
}

export default { initialize };

// nbagent presence: an empty view in a run's output that tells the kernel when the run's last
// view on this page is cleared from a cell that is still on the page (the cell was run again,
// Run All was pressed again, or Edit > Clear Outputs). A run waiting for a click nobody can see
// any more then stops instead of holding the kernel. Only a run that waits for a person says
// anything (a run that does not costs no message, nor does the end of a run, when its view is
// replaced by plain output), and a view that leaves with its notebook (tab closed, cell
// deleted) says nothing: the kernel cannot tell whether the person will come back. Views are
// counted per run on this page, so a re-render (new view, then the old one removed) is quiet.

// It also copies the run's provenance record into its cell's own metadata (``nbagent``), where
// JupyterLab's property inspector shows it and a saved notebook keeps it: the kernel has no way
// to write cell metadata, but the widget manager's document context holds the notebook model.
// The cell is the one whose outputs show the run's view (``view_id``); when the run ends its
// view is replaced by plain output carrying the record in its metadata, and that record (the
// kernel bounded it and hid secrets in it) is what is copied, never anything else of the page.

const VIEW = "application/vnd.jupyter.widget-view+json";
const MAX_RECORD = 256 * 1024; // characters of JSON; the kernel's records are far smaller

function notebookOf(model) {
  const manager = model.widget_manager;
  const context = manager && (manager.context || manager._context);
  const notebook = context && context.model;
  return notebook && notebook.cells ? notebook : null;
}

function* codeCells(notebook) {
  for (let i = 0; i < notebook.cells.length; i++) {
    const cell = notebook.cells.get(i);
    if (cell && cell.outputs && typeof cell.setMetadata === "function") yield cell;
  }
}

function showsView(cell, id) {
  for (let j = 0; j < cell.outputs.length; j++) {
    const shown = (cell.outputs.get(j).data || {})[VIEW];
    if (shown && shown.model_id === id) return true;
  }
  return false;
}

function recordIn(cell) {
  for (let j = 0; j < cell.outputs.length; j++) {
    const mine = (cell.outputs.get(j).metadata || {}).nbagent;
    const record = mine && typeof mine === "object" ? mine.provenance : null;
    if (record && typeof record === "object" && typeof record.run_id === "string") return record;
  }
  return null;
}

// Copy the run's record once it is in the cell's outputs; take it away again when those
// outputs go (the cell cleared or run again), so the cell never claims a run it no longer shows.
function follow(cell) {
  let copied = null;
  const update = () => {
    const record = recordIn(cell);
    if (copied === null) {
      if (!record) return;
      const text = JSON.stringify(record);
      if (text.length > MAX_RECORD) return cell.outputs.changed.disconnect(update);
      copied = record.run_id;
      cell.setMetadata("nbagent", JSON.parse(text));
    } else if (!record || record.run_id !== copied) {
      cell.outputs.changed.disconnect(update);
      const mine = cell.getMetadata("nbagent");
      if (mine && mine.run_id === copied) cell.deleteMetadata("nbagent");
    }
  };
  cell.outputs.changed.connect(update);
  update();
}

// Find the run's cell as soon as its view is in the notebook model (a quick run may end
// before its view is ever drawn), then follow that cell until the run's record arrives.
const placed = new Set(); // the runs (``key``) whose cell was found

function watchCell(model) {
  const notebook = notebookOf(model);
  if (!notebook) return;
  const waiting = [];
  const look = () => {
    const id = model.get("view_id");
    if (!id || placed.has(model.get("key"))) return;
    for (const cell of codeCells(notebook)) {
      if (showsView(cell, id)) {
        placed.add(model.get("key"));
        for (const other of waiting) other.outputs.changed.disconnect(look);
        waiting.length = 0;
        follow(cell);
        return;
      }
    }
  };
  for (const cell of codeCells(notebook)) {
    cell.outputs.changed.connect(look);
    waiting.push(cell);
  }
  model.on("change:view_id", look);
  look();
}

function initialize({ model }) {
  try {
    watchCell(model);
  } catch (error) {
    console.warn("nbagent: no cell metadata for this run", error);
  }
}

function render({ model, el }) {
  const views = (globalThis.__nbagentPresence ??= new Map());
  const key = model.get("key");
  const seen = views.get(key) || { live: 0, cleared: false };
  seen.live += 1;
  views.set(key, seen);
  if (seen.cleared) {
    seen.cleared = false;
    model.send({ event: "shown" });
  }
  let area = null;
  let tries = 0;
  const find = () => {
    if (el.isConnected) {
      area = el.closest(".jp-OutputArea") || el.parentElement;
    } else if (tries++ < 100) {
      setTimeout(find, 100);
    }
  };
  find();
  return () => {
    setTimeout(() => {
      seen.live -= 1;
      if (seen.live === 0 && model.get("waiting") && area && area.isConnected) {
        seen.cleared = true;
        model.send({ event: "cleared" });
      }
    }, 0);
  };
}

export default { initialize, render };

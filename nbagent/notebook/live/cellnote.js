// nbagent cell note: a widget that is never displayed. It copies one record from a cell's
// output metadata into a cell's own metadata (``nbagent``), where JupyterLab's property
// inspector shows it and a saved notebook keeps it (see nbagent/notebook/cellnote.py).
// ``find`` = "output": the cell whose output holds the refusal record whose run_id is ``key``;
// the record goes again when that output does. ``find`` = "below": the cell directly below the
// one whose output holds the ``%agent cells`` record with code_digest ``key``, once that new
// cell's source is the code the output shows. Only the record the kernel wrote is copied.

const MAX_RECORD = 64 * 1024; // characters of JSON; the kernel's records are far smaller
const WAIT = 60000; // ms: how long "below" waits for the front end to insert the new cell
const EVERY = 200; // ms between two looks, besides every change of the notebook's cells

function notebookOf(model) {
  const manager = model.widget_manager;
  const context = manager && (manager.context || manager._context);
  const notebook = context && context.model;
  return notebook && notebook.cells ? notebook : null;
}

function cellsOf(notebook) {
  const cells = [];
  for (let i = 0; i < notebook.cells.length; i++) cells.push(notebook.cells.get(i));
  return cells;
}

function text(value) {
  if (Array.isArray(value)) return value.join("");
  return typeof value === "string" ? value : "";
}

function sourceOf(cell) {
  const shared = cell && cell.sharedModel;
  if (!shared) return "";
  return text(typeof shared.getSource === "function" ? shared.getSource() : shared.source);
}

// the output of ``cell`` whose nbagent record passes ``test``, with that record
function carrying(cell, test) {
  if (!cell || !cell.outputs || typeof cell.setMetadata !== "function") return null;
  for (let j = 0; j < cell.outputs.length; j++) {
    const output = cell.outputs.get(j);
    const mine = (output.metadata || {}).nbagent;
    if (mine && typeof mine === "object" && test(mine)) return { output, record: mine };
  }
  return null;
}

function copyOf(record) {
  const json = JSON.stringify(record);
  return json.length <= MAX_RECORD ? JSON.parse(json) : null;
}

function isRefusal(key) {
  return (r) => r.run_id === key && typeof r.refused === "string";
}

function isCells(key) {
  return (r) => r.action === "cells" && r.code_digest === key;
}

// "output": write the refusal's record into its cell; take it away when the output goes
function markRefused(notebook, key) {
  for (const cell of cellsOf(notebook)) {
    const found = carrying(cell, isRefusal(key));
    if (!found) continue;
    const record = copyOf(found.record);
    if (!record) return true;
    cell.setMetadata("nbagent", record);
    const update = () => {
      if (carrying(cell, isRefusal(key))) return;
      cell.outputs.changed.disconnect(update);
      const mine = cell.getMetadata("nbagent");
      if (mine && mine.run_id === key) cell.deleteMetadata("nbagent");
    };
    cell.outputs.changed.connect(update);
    return true;
  }
  return false;
}

// "below": the new cell under the command's cell, once it holds the command's code
function markBelow(notebook, key) {
  const cells = cellsOf(notebook);
  for (let i = 0; i < cells.length; i++) {
    const found = carrying(cells[i], isCells(key));
    if (!found) continue;
    const shown = text((found.output.data || {})["text/plain"]);
    const cut = shown.indexOf("\n\n");
    const code = cut < 0 ? null : shown.slice(cut + 2).trimEnd();
    const below = cells[i + 1];
    if (!code || !below || below.type !== "code" || below.getMetadata("nbagent")) return false;
    if (sourceOf(below).trimEnd() !== code) return false;
    const record = copyOf(found.record);
    if (record) below.setMetadata("nbagent", record);
    return true;
  }
  return false;
}

function initialize({ model }) {
  let notebook = null;
  try {
    notebook = notebookOf(model);
  } catch (error) {
    console.warn("nbagent: no cell metadata here", error);
  }
  const done = (marked) => {
    try {
      model.send({ event: "done", marked });
    } catch (error) {
      /* the kernel closed the note already */
    }
  };
  if (!notebook) return done(false);
  const key = model.get("key");
  const mark = model.get("find") === "below" ? markBelow : markRefused;
  const started = Date.now();
  let timer = null;
  const look = () => {
    let marked = false;
    try {
      marked = mark(notebook, key);
    } catch (error) {
      console.warn("nbagent: no cell metadata for this cell", error);
      marked = null;
    }
    if (marked === false && Date.now() - started < WAIT) return;
    notebook.cells.changed.disconnect(look);
    clearInterval(timer);
    done(marked === true);
  };
  notebook.cells.changed.connect(look);
  timer = setInterval(look, EVERY);
  look();
}

export default { initialize };

// nbagent notebook channel: the page side of the notebook tools (see channel.py). A widget that
// is never displayed; its model reaches the notebook's shared model (a YNotebook from
// @jupyter/ydoc) through the widget manager's document context, as cellnote.js does.
// The kernel says "hello" with the id of the cell its run is in; a page whose notebook holds
// that cell answers "here" with an id of its own, and the kernel addresses every request after
// that to the one page it chose, so an edit is never applied twice (two tabs, collaborators).
// A page whose notebook does not hold the cell never answers.
// Requests: "read" (cells, bounded), "apply" (changes, each only if what it expects holds:
// nbagent/document/memory.py's apply_to_cells is the same, in Python). Edits of a source go
// through the cell's own undo history (JupyterLab's undo in the cell takes them back),
// new, deleted and moved cells through the notebook's, a whole undo ("together") as one step
// of the notebook's; records and outputs are written outside any undo history.

const RECORD = "nbagent_edit";
const MAX_RECORD = 64 * 1024; // characters of JSON of one cell's record sent back
const MAX_REMOVED = 2000000; // characters of JSON of a deleted cell or outputs kept for undo
const ID = /^[A-Za-z0-9_-]{1,64}$/;

function notebookOf(model) {
  const manager = model.widget_manager;
  const context = manager && (manager.context || manager._context);
  const notebook = context && context.model;
  if (!notebook || !notebook.sharedModel || !Array.isArray(notebook.sharedModel.cells)) return null;
  return { context, notebook, shared: notebook.sharedModel };
}

function text(value) {
  if (Array.isArray(value)) return value.join("");
  return typeof value === "string" ? value : "";
}

function cap(value, limit) {
  return value.length > limit ? value.slice(0, limit) : value;
}

function indexOf(shared, id) {
  const cells = shared.cells;
  for (let i = 0; i < cells.length; i++) if (cells[i].id === id) return i;
  return -1;
}

function sourceOf(cell) {
  return text(typeof cell.getSource === "function" ? cell.getSource() : cell.source);
}

function outputsOf(cell) {
  if (cell.cell_type !== "code") return [];
  const found = typeof cell.getOutputs === "function" ? cell.getOutputs() : cell.outputs;
  return Array.isArray(found) ? found : [];
}

function small(value) {
  if (value === undefined || value === null) return null;
  try {
    const json = JSON.stringify(value);
    return json.length <= MAX_RECORD ? JSON.parse(json) : null;
  } catch (error) {
    return null;
  }
}

function kept(value) {
  try {
    const json = JSON.stringify(value);
    return json.length <= MAX_REMOVED ? JSON.parse(json) : null;
  } catch (error) {
    return null;
  }
}

// one output as a read carries it (nbagent/document/cells.py: wire_output)
function wireOutput(output, limit) {
  const kind = output.output_type;
  if (kind === "stream") {
    return { output_type: "stream", name: cap(String(output.name || "stdout"), 20), text: cap(text(output.text), limit * 4) };
  }
  if (kind === "error") {
    const trace = Array.isArray(output.traceback) ? output.traceback.filter((t) => typeof t === "string") : [];
    return {
      output_type: "error",
      ename: cap(String(output.ename || ""), 200),
      evalue: cap(String(output.evalue || ""), limit * 2),
      traceback: trace.slice(-24).map((line) => cap(line, limit)),
    };
  }
  const data = output.data && typeof output.data === "object" ? output.data : {};
  return {
    output_type: kind === "execute_result" ? "execute_result" : "display_data",
    text: cap(text(data["text/plain"]), limit * 4),
    mimes: Object.keys(data).filter((m) => m !== "text/plain").slice(0, 20).map((m) => cap(m, 100)),
  };
}

function wireCell(cell, request, room) {
  const source = sourceOf(cell);
  const count = cell.cell_type === "code" ? cell.execution_count : null;
  const outputs = outputsOf(cell);
  const limit = Math.max(0, Math.min(request.max_source, room));
  return {
    id: cell.id,
    type: cell.cell_type,
    source: cap(source, limit),
    length: source.length,
    execution_count: Number.isInteger(count) ? count : null,
    outputs: outputs.slice(0, request.max_outputs).map((o) => wireOutput(o, request.max_output)),
    outputs_total: outputs.length,
    record: small(typeof cell.getMetadata === "function" ? cell.getMetadata(RECORD) : null),
  };
}

function read(found, request, cellId) {
  const { shared, context } = found;
  const wanted = Array.isArray(request.ids) ? new Set(request.ids) : null;
  const cells = [];
  const index = [];
  let room = request.budget;
  for (let i = 0; i < shared.cells.length && cells.length < request.max_cells; i++) {
    const cell = shared.cells[i];
    if (wanted && !wanted.has(cell.id)) continue;
    const made = wireCell(cell, request, room);
    room -= made.source.length;
    cells.push(made);
    index.push(i + 1);
  }
  const held = new Set(shared.cells.map((c) => c.id));
  return {
    path: context.path || "",
    total: shared.cells.length,
    active: cellId && held.has(cellId) ? cellId : null,
    cells,
    index,
    missing: wanted ? [...wanted].filter((id) => !held.has(id)) : [],
  };
}

// where a cell goes: after `after`, else before `before`, else (neither named) at the end;
// -1 when every anchor named is gone (memory.py: _place)
function place(shared, after, before) {
  if (after) {
    const i = indexOf(shared, after);
    if (i >= 0) return i + 1;
  }
  if (before) {
    const i = indexOf(shared, before);
    if (i >= 0) return i;
  }
  return after || before ? -1 : shared.cells.length;
}

function newId(shared) {
  for (;;) {
    const made = Math.random().toString(16).slice(2, 10).padEnd(8, "0");
    if (indexOf(shared, made) < 0) return made;
  }
}

function stopCapturing(manager) {
  if (manager && typeof manager.stopCapturing === "function") manager.stopCapturing();
}

// a change as the notebook's own step (the cell list's undo history): `run` is undoable
function structural(shared, together, run) {
  if (together) return run();
  stopCapturing(shared.undoManager);
  let result;
  shared.transact(() => {
    result = run();
  });
  stopCapturing(shared.undoManager);
  return result;
}

// outside every undo history (a record, outputs): nested in a transaction of no origin
function untracked(cell, run) {
  cell.transact(run, false);
}

function marked(outputs, mark, count) {
  if (outputs.length !== count || !outputs.length) return false;
  return outputs.every((o) => o && o.metadata && o.metadata.nbagent && o.metadata.nbagent.ran_by === mark);
}

function applyOne(shared, change, together, limit) {
  const op = change.op;
  if (op === "insert") {
    const at = place(shared, change.after, change.before);
    if (at < 0) return { ok: false, problem: "anchor" };
    const cell = Object.assign({}, change.cell);
    if (!ID.test(String(cell.id)) || indexOf(shared, cell.id) >= 0) cell.id = newId(shared);
    structural(shared, together, () => shared.insertCell(at, cell));
    return { ok: true, id: cell.id, index: at + 1 };
  }
  const i = indexOf(shared, change.id);
  if (i < 0) return { ok: false, id: change.id, problem: "missing" };
  const cell = shared.cells[i];
  const source = sourceOf(cell);
  if (op === "edit") {
    if (source !== change.expected) return { ok: false, id: change.id, index: i + 1, problem: "changed", source: cap(source, limit) };
    const oldType = cell.cell_type;
    if (change.cell_type && change.cell_type !== oldType) {
      const json = cell.toJSON();
      const made = { id: cell.id, cell_type: change.cell_type, source: change.source, metadata: json.metadata || {} };
      if (change.cell_type === "code") Object.assign(made, { outputs: [], execution_count: null });
      structural(shared, together, () => {
        shared.deleteCell(i);
        shared.insertCell(i, made);
      });
    } else if (together) {
      cell.setSource(change.source);
    } else {
      const manager = cell.undoManager;
      stopCapturing(manager); // the person's typing just before stays a step of its own
      cell.setSource(change.source);
      stopCapturing(manager);
    }
    return { ok: true, id: change.id, index: i + 1, old_type: oldType };
  }
  if (op === "delete") {
    if (change.expected !== null && change.expected !== undefined && source !== change.expected) {
      return { ok: false, id: change.id, index: i + 1, problem: "changed", source: cap(source, limit) };
    }
    const after = i > 0 ? shared.cells[i - 1].id : null;
    const before = i + 1 < shared.cells.length ? shared.cells[i + 1].id : null;
    const removed = kept(cell.toJSON());
    structural(shared, together, () => shared.deleteCell(i));
    return { ok: true, id: change.id, index: i + 1, removed, after, before };
  }
  if (op === "move") {
    if (change.after === change.id || change.before === change.id) {
      return { ok: false, id: change.id, index: i + 1, problem: "refused", text: "a cell cannot move next to itself" };
    }
    const after = i > 0 ? shared.cells[i - 1].id : null;
    const before = i + 1 < shared.cells.length ? shared.cells[i + 1].id : null;
    // the place among the other cells, which is the index the cell ends at
    const others = shared.cells.filter((c) => c.id !== change.id);
    let at = -1;
    if (change.after) {
      const j = others.findIndex((c) => c.id === change.after);
      if (j >= 0) at = j + 1;
    }
    if (at < 0 && change.before) at = others.findIndex((c) => c.id === change.before);
    if (at < 0 && !change.after && !change.before) at = others.length;
    if (at < 0) return { ok: false, id: change.id, index: i + 1, problem: "anchor" };
    if (at !== i) structural(shared, together, () => shared.moveCell(i, at));
    return { ok: true, id: change.id, index: at + 1, after, before };
  }
  if (op === "outputs") {
    if (cell.cell_type !== "code" || typeof cell.setOutputs !== "function") {
      return { ok: false, id: change.id, index: i + 1, problem: "refused", text: "it is not a code cell" };
    }
    const old = outputsOf(cell);
    if (change.mark && !marked(old, change.mark, old.length)) return { ok: false, id: change.id, index: i + 1, problem: "changed" };
    const count = cell.execution_count;
    untracked(cell, () => {
      cell.setOutputs(Array.isArray(change.outputs) ? change.outputs : []);
      cell.execution_count = Number.isInteger(change.execution_count) ? change.execution_count : null;
    });
    return { ok: true, id: change.id, index: i + 1, removed: kept(old), old_count: Number.isInteger(count) ? count : null };
  }
  if (op === "stamp") {
    untracked(cell, () => {
      if (change.value === null || change.value === undefined) cell.deleteMetadata(change.key);
      else cell.setMetadata(change.key, change.value);
    });
    return { ok: true, id: change.id, index: i + 1 };
  }
  return { ok: false, problem: "refused", text: "an unknown change" };
}

function apply(found, request) {
  const { shared } = found;
  const changes = Array.isArray(request.changes) ? request.changes : [];
  const results = [];
  const each = () => {
    for (const change of changes) {
      try {
        results.push(applyOne(shared, change, request.together === true, request.max_source));
      } catch (error) {
        results.push({ ok: false, problem: "refused", text: cap(String(error && error.message), 200) });
      }
    }
  };
  if (request.together === true) {
    stopCapturing(shared.undoManager);
    shared.transact(each); // one step of the notebook's undo history
    stopCapturing(shared.undoManager);
  } else {
    each();
  }
  return { results };
}

function initialize({ model }) {
  const page = typeof crypto !== "undefined" && crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);
  let found = null;
  try {
    found = notebookOf(model);
  } catch (error) {
    console.warn("nbagent: the notebook tools cannot reach this notebook", error);
  }
  model.on("msg:custom", (request) => {
    if (!found || !request || typeof request !== "object") return;
    if (request.op === "hello") {
      const cellId = typeof request.cell === "string" ? request.cell : null;
      const holds = cellId ? indexOf(found.shared, cellId) >= 0 : !request.path || request.path === found.context.path;
      if (!holds) return; // not the kernel's notebook: never answer
      // the page whose kernel connection ran the cell is the person's: the kernel prefers it
      const session = found.context.sessionContext && found.context.sessionContext.session;
      const client = session && session.kernel ? session.kernel.clientId : null;
      const ran = typeof request.client === "string" && request.client === client;
      model.send({ op: "here", ask: request.ask, page, ran, path: found.context.path || "", cells: found.shared.cells.length, rtc: found.notebook.collaborative === true });
      return;
    }
    if (request.page !== page) return; // addressed to another page
    let answer;
    try {
      answer = request.op === "read" ? read(found, request, request.cell) : request.op === "apply" ? apply(found, request) : { error: "unknown request" };
    } catch (error) {
      answer = { error: cap(String(error && error.message), 300) };
    }
    model.send(Object.assign({ op: request.op, ask: request.ask, page }, answer));
  });
}

export default { initialize };

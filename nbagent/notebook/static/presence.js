// nbagent presence: an empty view in a run's output that tells the kernel when the run's last
// view on this page is cleared from a cell that is still on the page (the cell was run again,
// Run All was pressed again, or Edit > Clear Outputs). A run waiting for a click nobody can see
// any more then stops instead of holding the kernel. Only a run that waits for a person says
// anything (a run that does not costs no message, nor does the end of a run, when its view is
// replaced by plain output), and a view that leaves with its notebook (tab closed, cell
// deleted) says nothing: the kernel cannot tell whether the person will come back. Views are
// counted per run on this page, so a re-render (new view, then the old one removed) is quiet.

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

export default { render };

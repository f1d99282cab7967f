// nbagent presence: an empty view in a run's output that tells the kernel when it is cleared
// from a cell that is still on the page (the cell was run again, Run All was pressed again, or
// Edit > Clear Outputs). A run waiting for a click nobody can see any more then stops instead
// of holding the kernel. A view that leaves with its notebook (tab closed, cell deleted) says
// nothing: the kernel cannot tell whether the person will come back.

function render({ model, el }) {
  const view = Math.random().toString(36).slice(2, 12);
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
  model.send({ event: "shown", view });
  return () => {
    setTimeout(() => {
      if (area && area.isConnected) model.send({ event: "cleared", view });
    }, 0);
  };
}

export default { render };

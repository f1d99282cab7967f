// nbagent plain stream: the same [offset, text] delta protocol as stream.js, shown as
// preformatted text (tool arguments, reasoning). textContent only: nothing is parsed as HTML.

function initialize({ model }) {
  model.on("msg:custom", (msg) => {
    if (!Array.isArray(msg) || msg.length !== 2) return;
    const [at, text] = msg;
    const value = model.get("value") || "";
    if (at === value.length) {
      model.set("value", value + text);
    } else if (at + text.length > value.length) {
      model.send({ event: "resync", have: value.length });
    }
  });
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "nbagent-stream";
  const body = document.createElement("div");
  root.appendChild(body);
  el.appendChild(root);
  let pending = false;
  const draw = () => {
    pending = false;
    root.dataset.format = model.get("format") || "plain";
    root.classList.toggle("nbagent-streaming", !!model.get("streaming"));
    body.textContent = model.get("value") || "";
  };
  const schedule = () => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(draw);
    }
  };
  for (const name of ["change:value", "change:format", "change:streaming"]) model.on(name, schedule);
  draw();
  return () => {
    for (const name of ["change:value", "change:format", "change:streaming"]) model.off(name, schedule);
  };
}

export default { initialize, render };

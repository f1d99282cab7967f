// nbagent secret line: text the kernel sends to the page as a message, never as widget state
// (see nbagent/notebook/secretline.py). A notebook saved with its widget state then holds only
// the placeholder; the text lives in the page's DOM while the view is shown.

function render({ model, el }) {
  const pre = document.createElement("pre");
  pre.style.whiteSpace = "pre-wrap";
  pre.style.margin = "2px 0";
  pre.textContent = model.get("placeholder");
  el.appendChild(pre);
  const onMessage = (message) => {
    if (message && typeof message.text === "string") {
      pre.textContent = message.text.slice(0, 4096);
    }
  };
  model.on("msg:custom", onMessage);
  model.send({ event: "ready" });
  return () => model.off("msg:custom", onMessage);
}

export default { render };

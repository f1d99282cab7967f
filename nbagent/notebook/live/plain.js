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

// Python highlighting for a code argument as it streams: a tokenizer over the text, each token
// a <span> whose textContent is set (never HTML), colored with the theme's editor colors.
const PY_KEYWORDS = new Set(("False None True and as assert async await break class continue def " +
  "del elif else except finally for from global if import in is lambda nonlocal not or pass " +
  "raise return try while with yield match case").split(" "));
const PY_BUILTINS = new Set(("print len range str int float list dict set tuple open sorted sum " +
  "min max abs enumerate zip map filter isinstance type super round any all repr bool").split(" "));
const PY_TOKEN = /(#[^\n]*)|([rRbBuUfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)))|(\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?j?\b)|(@[A-Za-z_][\w.]*)|([A-Za-z_]\w*)/g;
// The colors of the saved card (render.py CODE_COLORS): a card keeps its colors when the run
// ends and the live view becomes a saved output, and they read on light and dark themes.
const PY_COLORS = {
  comment: "#7c7c7c",
  string: "#378d37",
  number: "#cb5a00",
  keyword: "#d031cd",
  builtin: "#0184bc",
  decorator: "#a67101",
};

function highlight(body, text) {
  body.textContent = "";
  let last = 0;
  const add = (piece, kind) => {
    if (!piece) return;
    if (!kind) {
      body.appendChild(document.createTextNode(piece));
      return;
    }
    const span = document.createElement("span");
    span.style.color = PY_COLORS[kind];
    span.textContent = piece;
    body.appendChild(span);
  };
  PY_TOKEN.lastIndex = 0;
  let m;
  while ((m = PY_TOKEN.exec(text)) !== null) {
    if (m[0] === "") {
      PY_TOKEN.lastIndex++;
      continue;
    }
    add(text.slice(last, m.index), null);
    let kind = null;
    if (m[1]) kind = "comment";
    else if (m[2]) kind = "string";
    else if (m[3]) kind = "number";
    else if (m[4]) kind = "decorator";
    else if (PY_KEYWORDS.has(m[5])) kind = "keyword";
    else if (PY_BUILTINS.has(m[5])) kind = "builtin";
    add(m[0], kind);
    last = m.index + m[0].length;
  }
  add(text.slice(last), null);
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
    root.dataset.language = model.get("language") || "";
    root.classList.toggle("nbagent-streaming", !!model.get("streaming"));
    const text = model.get("value") || "";
    if (model.get("language") === "python" && text.length <= 200000) highlight(body, text);
    else body.textContent = text;
  };
  const schedule = () => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(draw);
    }
  };
  const events = ["change:value", "change:format", "change:streaming", "change:language"];
  for (const name of events) model.on(name, schedule);
  draw();
  return () => {
    for (const name of events) model.off(name, schedule);
  };
}

export default { initialize, render };

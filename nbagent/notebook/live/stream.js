// nbagent text stream: the kernel sends only what is new, as [offset, text] custom messages.
// The model keeps the whole text in its local "value" (so saved widget state has it) and asks
// the kernel to resend everything when an offset does not line up. Rendering never parses
// HTML strings: every node is built with createElement/textContent, so no model or tool text can
// run a script, and links are kept only for http(s) and mailto URLs.

function initialize({ model }) {
  model.on("msg:custom", (msg) => {
    if (!Array.isArray(msg) || msg.length !== 2) return;
    const [at, text] = msg;
    const value = model.get("value") || "";
    if (at === value.length) {
      model.set("value", value + text);
    } else if (at + text.length <= value.length) {
      // Already have it (a resend raced a delta): nothing to do.
    } else {
      model.send({ event: "resync", have: value.length });
    }
  });
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function el(tag, parent, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function safeUrl(url) {
  const trimmed = url.trim();
  if (!/^(https?:\/\/|mailto:)/i.test(trimmed)) return null;
  try {
    return new URL(trimmed).href;
  } catch (e) {
    return null;
  }
}

function flanked(text, start, end, mark) {
  if (end <= start || /\s/.test(text[start]) || /\s/.test(text[end - 1])) return false;
  if (mark[0] !== "_") return true;
  const before = text[start - mark.length - 1] || " ";
  const after = text[end + mark.length] || " ";
  return !/\w/.test(before) && !/\w/.test(after);
}

function inline(text, parent) {
  let buf = "";
  const flush = () => {
    if (buf) parent.appendChild(document.createTextNode(buf));
    buf = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    let m;
    if (c === "\\" && i + 1 < text.length && /[\\`*_{}[\]()#+\-.!~|>]/.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`" && (m = /^(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.exec(rest))) {
      flush();
      el("code", parent, m[2]);
      i += m[0].length;
      continue;
    }
    if ((c === "*" || c === "_" || c === "~") && text[i + 1] === c) {
      const mark = c + c;
      const end = text.indexOf(mark, i + 2);
      if (end > 0 && flanked(text, i + 2, end, mark)) {
        flush();
        inline(text.slice(i + 2, end), el(c === "~" ? "del" : "strong", parent));
        i = end + 2;
        continue;
      }
    } else if (c === "*" || c === "_") {
      const end = text.indexOf(c, i + 1);
      if (end > 0 && flanked(text, i + 1, end, c)) {
        flush();
        inline(text.slice(i + 1, end), el("em", parent));
        i = end + 1;
        continue;
      }
    }
    if ((c === "[" || (c === "!" && text[i + 1] === "[")) &&
        (m = /^!?\[([^\]]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))*)>?(?:\s+"[^"]*")?\s*\)/.exec(rest))) {
      flush();
      const href = safeUrl(m[2]);
      const label = m[0][0] === "!" ? `[image: ${m[1] || m[2]}]` : m[1];
      if (href) {
        const a = el("a", parent);
        a.href = href;
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
        inline(label, a);
      } else {
        inline(label, parent);
      }
      i += m[0].length;
      continue;
    }
    if (c === "h" && (m = /^https?:\/\/[^\s<>()[\]]+[^\s<>()[\].,;:!?'"]/.exec(rest)) &&
        (i === 0 || /[\s(]/.test(text[i - 1]))) {
      flush();
      const href = safeUrl(m[0]);
      if (href) {
        const a = el("a", parent, m[0]);
        a.href = href;
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
      } else {
        buf += m[0];
      }
      i += m[0].length;
      continue;
    }
    buf += c;
    i += 1;
  }
  flush();
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((x) => x.trim());
}

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    ITEM.test(line) || (line.includes("|") && next !== undefined && TABLE_RULE.test(next));
}

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i += 1;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length) {
        const close = FENCE.exec(lines[i]);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length && !close[2].trim()) {
          i += 1;
          break;
        }
        body.push(lines[i]);
        i += 1;
      }
      el("code", el("pre", parent), body.join("\n"));
    } else if ((m = HEADING.exec(line))) {
      inline(m[2], el(`h${m[1].length}`, parent));
      i += 1;
    } else if (RULE.test(line)) {
      el("hr", parent);
      i += 1;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i += 1;
      }
      blocks(inner, el("blockquote", parent));
    } else if ((m = ITEM.exec(line))) {
      const indent = m[1].length;
      const ordered = /\d/.test(m[2]);
      const list = el(ordered ? "ol" : "ul", parent);
      if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
      while (i < lines.length) {
        const item = ITEM.exec(lines[i]);
        if (!item || item[1].length !== indent || /\d/.test(item[2]) !== ordered) break;
        const body = [item[3]];
        i += 1;
        while (i < lines.length && lines[i].trim() && !(ITEM.exec(lines[i]) &&
               ITEM.exec(lines[i])[1].length <= indent)) {
          body.push(lines[i].replace(/^\s{0,6}/, (s) => s.slice(Math.min(s.length, indent + 2))));
          i += 1;
        }
        const li = el("li", list);
        if (body.length === 1) inline(body[0], li);
        else blocks(body, li);
      }
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      const table = el("table", parent);
      const head = el("tr", el("thead", table));
      for (const cell of cells(line)) inline(cell, el("th", head));
      const tbody = el("tbody", table);
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        const row = el("tr", tbody);
        for (const cell of cells(lines[i])) inline(cell, el("td", row));
        i += 1;
      }
    } else {
      const para = [line.trim()];
      i += 1;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i], lines[i + 1])) {
        para.push(lines[i].trim());
        i += 1;
      }
      inline(para.join("\n"), el("p", parent));
    }
  }
}

// The end of the last complete block: a blank line outside any code fence.
function stableEnd(text, from) {
  let fence = null;
  let end = from;
  let pos = from;
  while (pos < text.length) {
    const nl = text.indexOf("\n", pos);
    if (nl < 0) break;
    const line = text.slice(pos, nl);
    const m = FENCE.exec(line);
    if (fence) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && !m[2].trim()) fence = null;
    } else if (m) {
      fence = m[1];
    } else if (!line.trim()) {
      end = nl + 1;
    }
    pos = nl + 1;
  }
  return end;
}

function render({ model, el: host }) {
  const root = el("div", host);
  root.className = "nbagent-stream";
  const done = el("div", root);
  const tail = el("div", root);
  let rendered = "";
  let pending = false;

  const draw = () => {
    pending = false;
    const value = model.get("value") || "";
    const format = model.get("format") || "markdown";
    root.dataset.format = format;
    root.classList.toggle("nbagent-streaming", !!model.get("streaming"));
    if (format !== "markdown") {
      done.textContent = "";
      tail.textContent = value;
      rendered = "";
      return;
    }
    if (!value.startsWith(rendered)) {
      done.textContent = "";
      rendered = "";
    }
    const end = stableEnd(value, rendered.length);
    if (end > rendered.length) {
      const chunk = el("div", done);
      blocks(value.slice(rendered.length, end).split("\n"), chunk);
      rendered = value.slice(0, end);
    }
    tail.textContent = "";
    blocks(value.slice(rendered.length).split("\n"), tail);
  };
  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(draw);
  };
  model.on("change:value", schedule);
  model.on("change:format", schedule);
  model.on("change:streaming", schedule);
  draw();
  return () => {
    model.off("change:value", schedule);
    model.off("change:format", schedule);
    model.off("change:streaming", schedule);
  };
}

export default { initialize, render };

// tapes view: draws the diagram model that tapes/view.py embedded as JSON.
// Every string from the cassette goes into the page through textContent or a DOM property,
// never as markup; class names are built only from the model's fixed vocabularies.
"use strict";
(() => {
  const model = JSON.parse(document.getElementById("tapes-data").textContent);
  const MIN_WIRE = 160; // px: even a single stdio channel gets room for its arrows
  const COLUMN = 22; // px per channel when there are many
  const MAX_COLUMNS = 32; // more channels than this share columns (a long HTTP session has one per POST)
  const ROW_HEIGHT = 24;
  const LEGEND = [["request", "t-request"], ["notification", "t-notification"], ["result", "t-result"],
    ["error", "t-error"], ["HTTP head / stream end", "t-http"], ["SSE event", "t-sse"]];

  const sides = model.sides.map((side, index) => ({ ...side, index, elements: [], bySeq: new Map() }));
  const details = el("aside", "details");
  details.hidden = true;
  let detailsSide = null;
  let filterBox = null;
  let countBox = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const channelColor = (c) => `hsl(${(c * 137.508 + 195) % 360} 62% 42%)`;
  const groupColor = (g) => `hsl(${(g * 137.508 + 25) % 360} 70% 58%)`;

  function build() {
    const top = el("header", "top");
    top.append(el("h1", "", sides.map((side) => side.title).join("  ↔  ")));
    filterBox = el("input", "filter");
    filterBox.type = "search";
    filterBox.placeholder = "filter: method or text, #id or id:7";
    filterBox.setAttribute("aria-label", "filter frames");
    countBox = el("span", "count");
    const legend = el("span", "legend");
    for (const [name, type] of LEGEND) {
      const item = el("span", type);
      item.append(el("span", "swatch"), document.createTextNode(name));
      legend.append(item);
    }
    top.append(filterBox, countBox, legend);
    const panes = el("main", sides.length > 1 ? "panes compare" : "panes");
    for (const side of sides) panes.append(buildSide(side));
    document.body.append(top);
    if (model.differences.length) document.body.append(buildDifferences());
    document.body.append(panes, details);
    details.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-target]");
      if (link) {
        event.preventDefault();
        jump(detailsSide, Number(link.dataset.target));
      }
    });
    let timer = 0;
    filterBox.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(applyFilter, 80);
    });
    applyFilter();
  }

  function buildSide(side) {
    const pane = el("section", "pane");
    side.pane = pane;
    const meta = el("div", "meta");
    if (sides.length > 1) meta.append(el("strong", "side-title", side.title));
    for (const [name, value] of side.meta) {
      const item = el("span");
      item.append(el("b", "", name), document.createTextNode(value));
      meta.append(item);
    }
    for (const warning of side.warnings) meta.append(el("span", "warning", "⚠ " + warning));

    const columns = columnsOf(side.channels);
    side.packed = side.channels.length > MAX_COLUMNS;
    const count = Math.max(1, ...columns.map((col) => col + 1));
    const wire = Math.max(MIN_WIRE, count * COLUMN);
    const column = wire / count;
    const x = (c) => (columns[c] + 0.5) * column;
    const diagram = el("div", "diagram");
    diagram.style.setProperty("--wire", `${wire}px`);
    // The header is as tall as the longest (vertical) channel label needs, up to a limit.
    const longest = Math.max(...side.channels.map((channel) => channel.label.length), 6);
    diagram.style.setProperty("--heads", `${Math.min(128, 24 + longest * 6.5)}px`);

    const heads = el("div", "heads");
    const wireHead = el("div", "wire");
    const headLabels = Array.from({ length: count }, () => []);
    side.channels.forEach((channel, c) => headLabels[columns[c]].push(side.packed ? channel.name : channel.label));
    headLabels.forEach((labels, c) => {
      const text = labels.join(", ");
      const head = el("span", "chhead", text);
      head.title = text;
      head.style.left = `${c * column}px`;
      head.style.width = `${column}px`;
      head.style.lineHeight = `${column}px`;
      head.style.setProperty("--c", channelColor(c));
      wireHead.append(head);
    });
    heads.append(el("span", "seq", "#"), el("span", "time", "time"), el("div", "lane client", "Client"),
      wireHead, el("div", "lane server", "Server"));

    // Which channels are open at each row: their lifelines run through it.
    const open = side.rows.map(() => []);
    side.channels.forEach((channel, c) => {
      for (let i = channel.first; i <= channel.last; i++) open[i].push(c);
    });
    const rowsBox = el("div", "rows");
    const fragment = document.createDocumentFragment();
    side.rows.forEach((row, i) => {
      side.bySeq.set(row.seq, i);
      const element = buildRow(side, row, i, open[i], x);
      side.elements.push(element);
      fragment.append(element);
    });
    rowsBox.append(fragment);
    rowsBox.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-target]");
      if (link) {
        event.preventDefault();
        jump(side, Number(link.dataset.target));
        return;
      }
      const rowElement = event.target.closest(".row");
      if (rowElement) select(side, Number(rowElement.dataset.i));
    });
    diagram.append(heads, rowsBox);
    const scroll = el("div", "scroll");
    scroll.append(diagram);
    pane.append(meta, scroll);
    return pane;
  }

  // A column per channel; past MAX_COLUMNS, a channel takes the first column free again by its
  // first row (channels come in order of first frame, so this uses as few columns as can be).
  function columnsOf(channels) {
    if (channels.length <= MAX_COLUMNS) return channels.map((_, c) => c);
    const lastRow = [];
    return channels.map((channel) => {
      let column = lastRow.findIndex((last) => last < channel.first);
      if (column < 0) column = lastRow.push(0) - 1;
      lastRow[column] = channel.last;
      return column;
    });
  }

  function buildRow(side, row, i, openChannels, x) {
    const element = el("div", `row t-${row.type} ${row.dir === "c" ? "c2s" : "s2c"}`);
    element.id = `s${side.index}f${row.seq}`;
    element.dataset.i = i;
    if (row.g !== undefined) element.style.setProperty("--g", groupColor(row.g));
    if (row.notes) element.classList.add("diff");
    // Time between frames becomes height, so bursts and waits can be told apart at a glance.
    const gap = i ? row.t - side.rows[i - 1].t : 0;
    if (gap >= 0.05) element.style.minHeight = `${ROW_HEIGHT + Math.min(26, Math.round(6 + 9 * Math.log10(gap / 0.05)))}px`;

    const client = el("div", "lane client");
    const server = el("div", "lane server");
    const label = buildLabel(row);
    if (side.packed && side.channels[row.ch].first === i) label.prepend(el("span", "chtag", side.channels[row.ch].name));
    (row.dir === "c" ? client : server).append(label);

    const wire = el("div", "wire");
    for (const c of openChannels) {
      const channel = side.channels[c];
      const life = el("span", "life" + (i === channel.first ? " start" : "") + (i === channel.last ? " end" : ""));
      life.style.left = `${x(c)}px`;
      life.style.setProperty("--c", channelColor(c));
      wire.append(life);
      if (i === channel.last && channel.end) {
        const cut = channel.end === "client_disconnect" || channel.end === "upstream_error";
        const cap = el("span", cut ? "cap cut" : "cap", cut ? "✕" : null);
        cap.style.left = `${x(c)}px`;
        cap.style.setProperty("--c", channelColor(c));
        wire.append(cap);
      }
    }
    const bead = el("span", "bead");
    bead.style.left = `${x(row.ch)}px`;
    bead.style.setProperty("--c", channelColor(row.ch));
    bead.title = side.channels[row.ch].label;
    wire.append(el("span", "arrow"), bead);

    element.append(el("span", "seq", row.seq), el("span", "time", `+${row.t.toFixed(3)}s`), client, wire, server);
    return element;
  }

  function buildLabel(row) {
    const label = el("div", "label");
    label.append(el("span", "what", row.what));
    // In a comparison the difference is what matters most on a row: first, and cut before it hides.
    for (const note of row.notes || []) label.append(markElement("diff", `≠ ${note}`, null, note));
    if (row.eid !== undefined) {
      const eventId = el("span", "eid", `id ${row.eid}`);
      eventId.title = `SSE event id ${row.eid}`;
      label.append(eventId);
    }
    for (const [kind, text, target, explanation] of row.marks || []) label.append(markElement(kind, text, target, explanation));
    if (row.sum) label.append(el("span", "sum", row.sum));
    return label;
  }

  function markElement(kind, text, target, explanation) {
    const mark = el(target === null ? "span" : "a", `mark m-${kind}`, text);
    mark.title = explanation;
    if (target !== null) {
      mark.href = "#";
      mark.dataset.target = target;
    }
    return mark;
  }

  function link(seq) {
    const anchor = el("a", "", `#${seq}`);
    anchor.href = "#";
    anchor.dataset.target = seq;
    return anchor;
  }

  // --- selection and details -------------------------------------------------------------

  function select(side, i, withDetails = true) {
    for (const node of side.pane.querySelectorAll(".row.selected, .row.related")) node.classList.remove("selected", "related");
    const row = side.rows[i];
    if (row.g !== undefined) {
      for (const seq of side.groups[row.g].seqs) side.elements[side.bySeq.get(seq)].classList.add("related");
    }
    side.elements[i].classList.add("selected");
    if (withDetails) showDetails(side, row);
  }

  function jump(side, seq, withDetails = true) {
    const i = side.bySeq.get(seq);
    if (i === undefined) return;
    const element = side.elements[i];
    if (element.classList.contains("hidden")) {
      filterBox.value = "";
      applyFilter();
    }
    element.scrollIntoView({ block: "center" });
    element.classList.remove("flash");
    void element.offsetWidth; // restart the animation
    element.classList.add("flash");
    select(side, i, withDetails);
  }

  function showDetails(side, row) {
    detailsSide = side;
    const channel = side.channels[row.ch];
    const close = el("button", "close", "×");
    close.title = "close";
    close.addEventListener("click", () => {
      details.hidden = true;
      document.body.classList.remove("with-details");
    });
    const where = [row.dir === "c" ? "client → server" : "server → client", channel.label, `+${row.t.toFixed(6)}s`];
    if (sides.length > 1) where.push(side.title);
    details.replaceChildren(close, el("h2", "", `frame ${row.seq}: ${row.what}`), el("p", "where", where.join(" · ")));
    if (row.eid !== undefined) details.append(el("p", "", `SSE event id: ${row.eid}`));
    const notes = [...(row.notes || []).map((note) => ["≠", note, null]),
      ...(row.marks || []).map(([, , target, explanation]) => ["•", explanation, target])];
    if (notes.length) {
      const list = el("ul");
      for (const [, text, target] of notes) {
        const item = el("li", "", text);
        if (target !== null) item.append(document.createTextNode(" "), link(target));
        list.append(item);
      }
      details.append(list);
    }
    if (row.g !== undefined) {
      const group = side.groups[row.g];
      const links = el("p", "links");
      links.append(el("b", "", "interaction "), document.createTextNode(`${group.label}: `));
      for (const seq of group.seqs) links.append(link(seq));
      details.append(links);
    }
    if (channel.req !== null) {
      const heads = [side.rows[channel.req], channel.res !== null ? side.rows[channel.res] : null];
      details.append(el("h3", "", "HTTP"), el("pre", "http", heads.filter(Boolean).map(httpHead).join("\n\n")));
    }
    const body = typeof row.body === "string" ? row.body : JSON.stringify(row.body, null, 2);
    details.append(el("h3", "", "frame"), el("pre", "json", body));
    details.hidden = false;
    document.body.classList.add("with-details"); // the diagram makes room rather than hide under the panel
  }

  function httpHead(row) {
    const info = row.body && typeof row.body === "object" ? row.body.info : null;
    if (!info || typeof info !== "object") return String(row.what);
    const first = "status" in info ? `HTTP ${info.status}` : `${info.method} ${info.path}`;
    const headers = Array.isArray(info.headers) ? info.headers : [];
    return [first, ...headers.map((pair) => (Array.isArray(pair) ? pair.join(": ") : JSON.stringify(pair)))].join("\n");
  }

  // --- filter ------------------------------------------------------------------------------

  function parseQuery(text) {
    return text.toLowerCase().split(/\s+/).filter(Boolean).map((term) => {
      const id = /^(?:#|id:)(.+)$/.exec(term);
      return id ? { id: id[1] } : { text: term };
    });
  }

  function matches(side, row, terms) {
    for (const term of terms) {
      if (term.id !== undefined) {
        if (!(row.ids || []).some((id) => id.toLowerCase() === term.id)) return false;
      } else {
        row.haystack ??= [row.what, side.channels[row.ch].label, row.eid || "", row.sum || ""].join(" ").toLowerCase();
        if (!row.haystack.includes(term.text)) return false;
      }
    }
    return true;
  }

  function applyFilter() {
    const terms = parseQuery(filterBox.value);
    let shown = 0;
    let total = 0;
    for (const side of sides) {
      side.rows.forEach((row, i) => {
        const visible = matches(side, row, terms);
        side.elements[i].classList.toggle("hidden", !visible);
        shown += visible;
      });
      total += side.rows.length;
    }
    countBox.textContent = terms.length ? `${shown} of ${total} frames` : `${total} frames`;
  }

  // --- comparison ----------------------------------------------------------------------------

  function buildDifferences() {
    const box = el("details", "diffs");
    box.open = true;
    const count = model.differences.length;
    box.append(el("summary", "", `${count} difference${count === 1 ? "" : "s"}`));
    const list = el("ol");
    const seqs = (list) => (list.length ? list.map((seq) => `#${seq}`).join(" ") : "—");
    for (const difference of model.differences) {
      const item = el("li");
      if (difference.severity) item.append(el("b", "severity", `${difference.severity} `));
      const button = el("button", "", difference.note);
      button.addEventListener("click", () => {
        if (difference.a.length) jump(sides[0], difference.a[0], false);
        if (difference.b.length) jump(sides[1], difference.b[0], false);
      });
      const where = `${sides[0].title} ${seqs(difference.a)} · ${sides[1].title} ${seqs(difference.b)}`;
      item.append(button, el("span", "where", where));
      list.append(item);
    }
    box.append(list);
    return box;
  }

  build();
})();

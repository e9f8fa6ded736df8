// tapes view: draws the diagram of the frames tapes/render/view.py wrote into the page, with the
// model view_model.js makes of them (rows as columns, their marks; a frame's JSON decoded again
// only when it is opened, summarised on screen or searched). Only the rows on screen are in the
// DOM: a million frames scroll like forty.
// Every string from the cassette goes into the page through textContent or a DOM property,
// never as markup; class names are built only from fixed vocabularies.
"use strict";
(() => {
  const model = JSON.parse(document.getElementById("tapes-data").textContent);
  const { TYPES, SUMMARY_LIMIT } = tapesModel;
  const MESSAGE_TYPES = new Set(["request", "notification", "result", "error", "batch", "invalid"]);
  const MIN_WIRE = 160; // px: even a single stdio channel gets room for its arrows
  const COLUMN = 22; // px per channel when there are many
  const MAX_COLUMNS = 32; // more channels than this share columns (a long HTTP session has one per POST)
  const ROW_HEIGHT = 24;
  const OVERSCAN = 12; // rows drawn beyond each edge of the screen
  const MAX_HEIGHT = 8e6; // px: browsers cap an element's height; past this, scrolling is scaled
  const MAX_LINKS = 300; // frames listed for one interaction in the details panel
  const LEGEND = [["request", "t-request"], ["notification", "t-notification"], ["result", "t-result"],
    ["error", "t-error"], ["HTTP head / stream end", "t-http"], ["SSE event", "t-sse"]];

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

  // --- the data -------------------------------------------------------------------------------

  // A side's model, from its frames' elements (emptied once read: the model keeps their bytes).
  function load(data, index) {
    const elements = [...document.querySelectorAll(`script.tapes-frames[data-side="${index}"]`)];
    const side = tapesModel.sideOf(data, elements.map((element) => element.textContent), index);
    for (const element of elements) element.textContent = "";
    Object.assign(side, { rendered: new Map(), selected: -1, selectedGroup: -1 });
    // Seqs are usually 1, 2, 3...: then a seq's row is arithmetic, else a map.
    side.contiguous = side.seq.every((seq, i) => seq === side.seq[0] + i);
    if (!side.contiguous) side.bySeqMap = new Map(Array.from(side.seq, (seq, i) => [seq, i]));
    side.order = Int32Array.from({ length: side.n }, (_, i) => i);
    return side;
  }

  let sides;
  try {
    sides = model.sides.map(load);
  } catch (error) { // a page that cannot be read says so, rather than stay blank
    document.body.append(el("p", "unreadable", `tapes view: this page's frames could not be read (${error.message}).`));
    throw error;
  }

  function rowOfSeq(side, seq) {
    if (!side.contiguous) return side.bySeqMap.get(seq);
    const i = seq - side.seq[0];
    return i >= 0 && i < side.n && Number.isInteger(i) ? i : undefined;
  }

  const typeOf = (side, i) => TYPES[side.k[i] >> 1];
  const fromClient = (side, i) => (side.k[i] & 1) === 0;

  // The interaction a row belongs to: its own, or on HTTP that of the first request its exchange carried.
  function groupOf(side, i) {
    if (side.g[i] >= 0) return side.g[i];
    const channel = side.channels[side.ch[i]];
    return channel.name !== "stdio" && channel.g !== null ? channel.g : -1;
  }

  // The first index in [0, count) for which `before` is false (count when there is none), where
  // `before` holds up to some index and not after it: the binary search of every sorted lookup here.
  function partitionPoint(count, before) {
    let low = 0;
    let high = count;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (before(middle)) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  function marksOf(side, i) {
    let low = partitionPoint(side.markRows.length, (m) => side.markRows[m] < i);
    const found = [];
    while (low < side.markRows.length && side.markRows[low] === i) found.push(tapesModel.expand(side.marks[low++]));
    return found;
  }

  // A group is named by its request's row (or, for a request in a batch, by its label).
  function groupLabel(side, group) {
    const label = side.groups[group];
    return typeof label === "number" ? `${side.what[label].replace(/^request /, "")} (frame ${side.seq[label]})` : label;
  }

  const bodyOf = tapesModel.frameBody; // a frame's JSON: an object, or a string when cut for being huge
  const compact = (value) => tapesModel.compact(value, SUMMARY_LIMIT).slice(0, SUMMARY_LIMIT + 1);
  const messageWhat = (item) => tapesModel.messageWhat(item, tapesModel.classify(item));

  // What a row shows beside its name: the model has it for HTTP heads, SSE events and the like;
  // a message's, a stderr or raw line's is worked out here from its JSON, for the rows on screen only.
  function summaryOf(side, i) {
    const type = typeOf(side, i);
    const lines = type === "raw" || type === "stderr";
    if (side.sum[i] || !(lines || MESSAGE_TYPES.has(type))) return side.sum[i];
    const body = bodyOf(side, i);
    if (typeof body === "string") return body.slice(0, SUMMARY_LIMIT + 1);
    if (lines) {
      const base64 = body["data (base64)"];
      const text = base64 === undefined ? body.data || ""
        : new TextDecoder().decode(Uint8Array.from(atob(base64.slice(0, 4 * SUMMARY_LIMIT)), (c) => c.charCodeAt(0)));
      return text.slice(0, SUMMARY_LIMIT + 1);
    }
    const message = body.message;
    if (type === "request" || type === "notification") return "params" in message ? compact(message.params) : "";
    if (type === "result") return compact(message.result);
    if (type === "error") {
      const text = typeof message.error.message === "string" ? message.error.message : compact(message.error.message);
      return ("data" in message.error ? `${text} ${compact(message.error.data)}` : text).slice(0, SUMMARY_LIMIT + 1);
    }
    if (type === "batch") return message.map(messageWhat).join(", ").slice(0, SUMMARY_LIMIT + 1);
    return compact(message);
  }

  // --- the page -------------------------------------------------------------------------------

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
    side.x = (c) => (columns[c] + 0.5) * column;
    // Each column's channels in order of first row, to find the one open at a row by binary search.
    side.columns = Array.from({ length: count }, () => []);
    side.channels.forEach((channel, c) => side.columns[columns[c]].push(c));
    const diagram = el("div", "diagram");
    diagram.style.setProperty("--wire", `${wire}px`);
    // Wide enough for the longest seq and time (a million frames run to seven digits).
    const digits = (value) => String(Math.floor(Math.abs(value))).length;
    if (side.n && digits(side.seq[side.n - 1]) > 4) diagram.style.setProperty("--seq", `${12 + 7.5 * digits(side.seq[side.n - 1])}px`);
    if (side.n && digits(side.t[side.n - 1]) > 2) diagram.style.setProperty("--time", `${52 + 7 * digits(side.t[side.n - 1])}px`);
    // The header is as tall as the longest (vertical) channel label needs, up to a limit.
    const longest = side.channels.reduce((most, channel) => Math.max(most, channel.label.length), 6);
    diagram.style.setProperty("--heads", `${Math.min(128, 24 + longest * 6.5)}px`);

    const heads = el("div", "heads");
    const wireHead = el("div", "wire");
    side.columns.forEach((members, c) => {
      const shown = members.slice(0, 20).map((m) => (side.packed ? side.channels[m].name : side.channels[m].label));
      const text = shown.join(", ") + (members.length > shown.length ? `, … (${members.length} channels)` : "");
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

    side.rowsBox = el("div", "rows");
    side.rowsBox.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-target]");
      if (link) {
        event.preventDefault();
        jump(side, Number(link.dataset.target));
        return;
      }
      const rowElement = event.target.closest(".row");
      if (rowElement) select(side, Number(rowElement.dataset.i));
    });
    diagram.append(heads, side.rowsBox);
    side.scroll = el("div", "scroll");
    side.scroll.append(diagram);
    side.heads = heads;
    side.scroll.addEventListener("scroll", () => render(side));
    new ResizeObserver(() => render(side)).observe(side.scroll);
    pane.append(meta, side.scroll);
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

  // Time between frames becomes height, so bursts and waits can be told apart at a glance.
  function heightOf(side, i) {
    const gap = i ? side.t[i] - side.t[i - 1] : 0;
    return gap >= 0.05 ? ROW_HEIGHT + Math.min(26, Math.round(6 + 9 * Math.log10(gap / 0.05))) : ROW_HEIGHT;
  }

  // The shown rows' offsets, after a filter: tops[p] is where the p-th shown row begins.
  function layout(side) {
    const tops = new Float64Array(side.order.length + 1);
    for (let p = 0; p < side.order.length; p++) tops[p + 1] = tops[p] + heightOf(side, side.order[p]);
    side.tops = tops;
    side.total = tops[side.order.length];
    side.boxHeight = Math.min(side.total, MAX_HEIGHT);
    side.rowsBox.style.height = `${side.boxHeight}px`;
    side.position = new Map(); // row -> its place among the shown rows, filled as asked
    for (const element of side.rendered.values()) element.remove();
    side.rendered.clear();
  }

  // The scrolled distance, in the rows' own pixels: the same as scrollTop unless there are so many
  // rows that the box had to be shorter than they are.
  function view(side) {
    const height = Math.max(0, side.scroll.clientHeight - side.heads.offsetHeight);
    const top = Math.max(0, side.scroll.scrollTop);
    const ratio = side.boxHeight > height ? (side.total - height) / (side.boxHeight - height) : 1;
    return { top: top * ratio, offset: top - top * ratio, height, ratio };
  }

  function placeOf(side, i) {
    let place = side.position.get(i);
    if (place === undefined) {
      const low = partitionPoint(side.order.length, (p) => side.order[p] < i);
      place = side.order[low] === i ? low : -1;
      side.position.set(i, place);
    }
    return place;
  }

  function render(side) {
    if (!side.tops) return;
    const { top, offset, height } = view(side);
    const low = partitionPoint(side.order.length, (p) => side.tops[p + 1] <= top); // the first row that ends below the top
    const first = Math.max(0, low - OVERSCAN);
    let last = low;
    while (last < side.order.length && side.tops[last] < top + height) last++;
    last = Math.min(side.order.length, last + OVERSCAN);
    const keep = new Map();
    const fragment = document.createDocumentFragment();
    for (let p = first; p < last; p++) {
      const i = side.order[p];
      let element = side.rendered.get(i);
      if (!element) {
        element = buildRow(side, i);
        fragment.append(element);
      }
      element.style.top = `${side.tops[p] + offset}px`;
      element.classList.toggle("selected", i === side.selected);
      element.classList.toggle("related", side.selectedGroup >= 0 && groupOf(side, i) === side.selectedGroup);
      keep.set(i, element);
    }
    for (const [i, element] of side.rendered) if (!keep.has(i)) element.remove();
    side.rendered = keep;
    side.rowsBox.append(fragment);
  }

  function openChannels(side, i) {
    const open = [];
    for (const members of side.columns) {
      // after the last channel of the column that begins at or before the row
      const low = partitionPoint(members.length, (m) => side.channels[members[m]].first <= i);
      if (low && side.channels[members[low - 1]].last >= i) open.push(members[low - 1]);
    }
    return open;
  }

  function buildRow(side, i) {
    const type = typeOf(side, i);
    const client = fromClient(side, i);
    const ch = side.ch[i];
    const element = el("div", `row t-${type} ${client ? "c2s" : "s2c"}`);
    element.id = `s${side.index}f${side.seq[i]}`;
    element.dataset.i = i;
    const group = groupOf(side, i);
    if (group >= 0) element.style.setProperty("--g", groupColor(group));
    if (side.notes.has(i)) element.classList.add("diff");
    element.style.height = `${heightOf(side, i)}px`;

    const clientLane = el("div", "lane client");
    const serverLane = el("div", "lane server");
    const label = buildLabel(side, i);
    if (side.packed && side.channels[ch].first === i) label.prepend(el("span", "chtag", side.channels[ch].name));
    (client ? clientLane : serverLane).append(label);

    const wire = el("div", "wire");
    for (const c of openChannels(side, i)) {
      const channel = side.channels[c];
      const life = el("span", "life" + (i === channel.first ? " start" : "") + (i === channel.last ? " end" : ""));
      life.style.left = `${side.x(c)}px`;
      life.style.setProperty("--c", channelColor(c));
      wire.append(life);
      if (i === channel.last && channel.end) {
        const cut = channel.end === "client_disconnect" || channel.end === "upstream_error";
        const cap = el("span", cut ? "cap cut" : "cap", cut ? "✕" : null);
        cap.style.left = `${side.x(c)}px`;
        cap.style.setProperty("--c", channelColor(c));
        wire.append(cap);
      }
    }
    const bead = el("span", "bead");
    bead.style.left = `${side.x(ch)}px`;
    bead.style.setProperty("--c", channelColor(ch));
    bead.title = side.channels[ch].label;
    wire.append(el("span", "arrow"), bead);

    element.append(el("span", "seq", side.seq[i]), el("span", "time", `+${side.t[i].toFixed(3)}s`),
      clientLane, wire, serverLane);
    return element;
  }

  function buildLabel(side, i) {
    const label = el("div", "label");
    label.append(el("span", "what", side.what[i]));
    // In a comparison the difference is what matters most on a row: first, and cut before it hides.
    for (const note of side.notes.get(i) || []) label.append(markElement("diff", `≠ ${note}`, null, note));
    const eid = side.eids.get(i);
    if (eid !== undefined) {
      const eventId = el("span", "eid", `id ${eid}`);
      eventId.title = `SSE event id ${eid}`;
      label.append(eventId);
    }
    for (const [kind, text, target, explanation] of marksOf(side, i)) label.append(markElement(kind, text, target, explanation));
    const summary = summaryOf(side, i);
    if (summary) label.append(el("span", "sum", summary));
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
    side.selected = i;
    side.selectedGroup = groupOf(side, i);
    render(side);
    if (withDetails) showDetails(side, i);
  }

  function jump(side, seq, withDetails = true) {
    const i = rowOfSeq(side, seq);
    if (i === undefined) return;
    if (placeOf(side, i) < 0) {
      filterBox.value = "";
      applyFilter();
    }
    const place = placeOf(side, i);
    const { height, ratio } = view(side);
    side.scroll.scrollTop = (side.tops[place] - (height - (side.tops[place + 1] - side.tops[place])) / 2) / ratio;
    render(side);
    const element = side.rendered.get(i);
    element.classList.remove("flash");
    void element.offsetWidth; // restart the animation
    element.classList.add("flash");
    select(side, i, withDetails);
  }

  function showDetails(side, i) {
    detailsSide = side;
    const channel = side.channels[side.ch[i]];
    const close = el("button", "close", "×");
    close.title = "close";
    close.addEventListener("click", () => {
      details.hidden = true;
      document.body.classList.remove("with-details");
    });
    const where = [fromClient(side, i) ? "client → server" : "server → client", channel.label, `+${side.t[i].toFixed(6)}s`];
    if (sides.length > 1) where.push(side.title);
    details.replaceChildren(close, el("h2", "", `frame ${side.seq[i]}: ${side.what[i]}`), el("p", "where", where.join(" · ")));
    const eid = side.eids.get(i);
    if (eid !== undefined) details.append(el("p", "", `SSE event id: ${eid}`));
    const notes = [...(side.notes.get(i) || []).map((note) => ["≠", note, null]),
      ...marksOf(side, i).map(([, , target, explanation]) => ["•", explanation, target])];
    if (notes.length) {
      const list = el("ul");
      for (const [, text, target] of notes) {
        const item = el("li", "", text);
        if (target !== null) item.append(document.createTextNode(" "), link(target));
        list.append(item);
      }
      details.append(list);
    }
    const group = groupOf(side, i);
    if (group >= 0) {
      const links = el("p", "links");
      links.append(el("b", "", "interaction "), document.createTextNode(`${groupLabel(side, group)}: `));
      let shown = 0;
      let more = 0;
      for (let j = 0; j < side.n; j++) {
        if (groupOf(side, j) !== group) continue;
        if (shown++ < MAX_LINKS) links.append(link(side.seq[j]));
        else more++;
      }
      if (more) links.append(document.createTextNode(`… and ${more} more`));
      details.append(links);
    }
    if (channel.req !== null) {
      const heads = [channel.req, channel.res].filter((row) => row !== null).map((row) => httpHead(side, row));
      details.append(el("h3", "", "HTTP"), el("pre", "http", heads.join("\n\n")));
    }
    const body = bodyOf(side, i);
    details.append(el("h3", "", "frame"), el("pre", "json", typeof body === "string" ? body : tapesModel.jsonText(body, 2)));
    details.hidden = false;
    document.body.classList.add("with-details"); // the diagram makes room rather than hide under the panel
  }

  function httpHead(side, i) {
    const body = bodyOf(side, i);
    const info = body && typeof body === "object" ? body.info : null;
    if (!info || typeof info !== "object") return String(side.what[i]);
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

  // Rows with a text term in their name, channel or event id, or anywhere in their JSON.
  function textMatches(side, term) {
    const found = new Uint8Array(side.n);
    const labels = side.channels.map((channel) => channel.label.toLowerCase().includes(term));
    for (let i = 0; i < side.n; i++) {
      if (labels[side.ch[i]] || side.what[i].toLowerCase().includes(term)) found[i] = 1;
    }
    for (const [i, eid] of side.eids) if (eid.toLowerCase().includes(term)) found[i] = 1;
    tapesModel.searchText(side).forEach((text, c) => {
      let at = text.indexOf(term);
      if (at < 0) return;
      let row = c * tapesModel.CHUNK;
      let lineEnd = text.indexOf("\n");
      while (at >= 0) {
        while (lineEnd >= 0 && lineEnd < at) {
          row++;
          lineEnd = text.indexOf("\n", lineEnd + 1);
        }
        found[row] = 1;
        if (lineEnd < 0) break;
        at = text.indexOf(term, lineEnd + 1);
      }
    });
    return found;
  }

  function filterSide(side, terms) {
    if (!terms.length) return Int32Array.from({ length: side.n }, (_, i) => i);
    let keep = new Uint8Array(side.n).fill(1);
    for (const term of terms) {
      if (term.id !== undefined) {
        for (let i = 0; i < side.n; i++) {
          if (keep[i] && !(side.ids[i] && side.ids[i].toLowerCase().split(" ").includes(term.id))) keep[i] = 0;
        }
      } else {
        const found = textMatches(side, term.text);
        for (let i = 0; i < side.n; i++) keep[i] &= found[i];
      }
    }
    const order = [];
    for (let i = 0; i < side.n; i++) if (keep[i]) order.push(i);
    return Int32Array.from(order);
  }

  function applyFilter() {
    const terms = parseQuery(filterBox.value);
    let shown = 0;
    let total = 0;
    for (const side of sides) {
      side.order = filterSide(side, terms);
      layout(side);
      render(side);
      shown += side.order.length;
      total += side.n;
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

  // The text filter searches every frame's JSON: made while the page is idle, a chunk at a time,
  // so that the first search of a big session need not wait for it.
  function prepareSearch(side, c) {
    const idle = window.requestIdleCallback || ((next) => setTimeout(next, 1));
    idle(() => {
      if (tapesModel.searchChunk(side, c)) prepareSearch(side, c + 1);
    });
  }

  build();
  for (const side of sides) prepareSearch(side, 0);
})();

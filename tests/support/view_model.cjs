// The model of a page tapes view wrote, as the page's script makes it, for tests in Python
// (tests/support/view_page.py): reads the page on stdin, writes the model as JSON on stdout.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const tapesModel = require(path.join(__dirname, "../../tapes/render/view_assets/view_model.js"));

const page = fs.readFileSync(0, "utf8");
const data = JSON.parse(/<script type="application\/json" id="tapes-data">(.*?)<\/script>/s.exec(page)[1]);
const sides = data.sides.map((entry, index) => {
  const texts = [...page.matchAll(new RegExp(`<script type="application/octet-stream" class="tapes-frames" data-side="${index}">(.*?)</script>`, "gs"))]
    .map((found) => found[1]);
  const side = tapesModel.sideOf(entry, texts, index);
  const marks = new Map();
  for (const mark of side.marks) marks.set(mark[0], [...(marks.get(mark[0]) || []), tapesModel.expand(mark)]);
  const rows = Array.from({ length: side.n }, (_, i) => {
    const row = { seq: side.seq[i], t: side.t[i], dir: side.k[i] & 1 ? "s" : "c", type: tapesModel.TYPES[side.k[i] >> 1],
      ch: side.ch[i], what: side.what[i] };
    if (side.sum[i]) row.sum = side.sum[i];
    if (side.eids.has(i)) row.eid = side.eids.get(i);
    if (side.g[i] >= 0) row.g = side.g[i];
    if (side.ids[i]) row.ids = side.ids[i].split(" ");
    if (marks.has(i)) row.marks = marks.get(i);
    if (side.notes.has(i)) row.notes = side.notes.get(i);
    const body = tapesModel.frameBody(side, i);
    row.body = typeof body === "string" ? body : JSON.parse(tapesModel.jsonText(body));
    return row;
  });
  return { title: side.title, meta: side.meta, warnings: side.warnings, rows, channels: side.channels, groups: side.groups };
});
process.stdout.write(JSON.stringify({ sides, differences: data.differences }));

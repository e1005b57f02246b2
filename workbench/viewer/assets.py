"""The viewer's stylesheet and scripts, inlined into its pages (no file to find, no CDN).

``INDEX_JS`` is the world index: it reads ``window.WB_INDEX`` (columns, rows, pages)
from ``data/index.js`` and draws one page of rows at a time, so ten thousand worlds
cost the DOM a page's worth of rows. Sorting, the per-column filters and the search
run over the arrays in memory. The search text (``data/search.js``) is loaded the
first time something is typed into the search box. Every value is put into the page
with ``textContent`` (never as HTML), so model-written text stays text."""

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:14px;margin:0 18px 40px 18px;color:#222}
h1{font-size:20px;margin:14px 0 4px 0} h2{font-size:16px;margin:22px 0 6px 0}
.wb-banner{background:#fff3b0;border:1px solid #e0c200;padding:4px 10px;margin:6px 0;border-radius:4px}
.wb-note{color:#555;font-size:12px;margin:4px 0}
nav.wb-tabs a{margin-right:14px;font-weight:600}
table.wb-grid{border-collapse:collapse;font-size:12.5px}
table.wb-grid th,table.wb-grid td{border-bottom:1px solid #e5e5e5;padding:2px 6px;text-align:left;vertical-align:top;
  max-width:28em;overflow-wrap:break-word}
table.wb-grid th{background:#f3f3f3;position:sticky;top:0}
#wb-index th.wb-sortable{cursor:pointer;white-space:nowrap}
#wb-index th.wb-sortable:hover{background:#e6eefc}
#wb-index tr.wb-filters th{background:#fafafa;font-weight:normal}
#wb-index tr.wb-filters input,#wb-index tr.wb-filters select{width:7em;font-size:12px}
#wb-index td.wb-world{white-space:nowrap}
#wb-index td.wb-num{text-align:right;font-variant-numeric:tabular-nums}
#wb-index th.g-factor{background:#eef5ec} #wb-index th.g-usage{background:#f6eefc} #wb-index th.g-metric{background:#fdf3e6}
.wb-controls{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin:8px 0}
#wb-search{width:28em;padding:3px 6px}
.wb-box{overflow-x:auto;max-width:100%}
details{margin:2px 0} summary{cursor:pointer}
.wb-section{margin-top:18px}
.wb-tag{background:#8c564b;color:white;padding:0 6px;border-radius:8px;font-size:12px}
"""

# the range inputs of a world page (e.g. recall's memory after each turn): show the pane the slider names
SLIDER_JS = """
document.querySelectorAll('.wb-slider').forEach(function (box) {
  var input = box.querySelector('input[type=range]'), label = box.querySelector('.wb-slider-label');
  var labels = JSON.parse(box.querySelector('.wb-labels').textContent);
  input.addEventListener('input', function () {
    box.querySelectorAll('.wb-pane').forEach(function (p) { p.hidden = p.dataset.pane !== input.value; });
    label.textContent = labels[+input.value];
  });
});
"""

INDEX_JS = r"""
(function () {
  var D = window.WB_INDEX, cols = D.columns, rows = D.rows, server = window.WB_MODE === 'server';
  var state = {sort: null, desc: false, page: 0, size: 50, filters: {}, words: [], query: ''};
  var search = null, searchLoading = false;
  var $ = function (id) { return document.getElementById(id); };
  var worldCol = cols.findIndex(function (c) { return c.name === 'world'; });
  var controls = {};  // column name -> its filter control

  // the view's state lives in the address's #fragment, so going back from a world finds the same rows
  function saveHash() {
    var p = new URLSearchParams();
    if (state.query) p.set('q', state.query);
    if (state.sort !== null) p.set('sort', cols[state.sort].name);
    if (state.desc) p.set('desc', '1');
    if (state.page) p.set('page', String(state.page + 1));
    if (state.size !== 50) p.set('size', String(state.size));
    Object.keys(state.filters).forEach(function (j) {
      var f = state.filters[j];
      if (!f) return;
      if (f.exact) p.set('x.' + cols[j].name, f.value); else p.set('f.' + cols[j].name, f);
    });
    var h = p.toString();
    try { history.replaceState(null, '', h ? '#' + h : location.pathname + location.search); } catch (e) { /* file: may refuse */ }
  }
  function loadHash() {
    var p = new URLSearchParams(location.hash.slice(1)), page = 0;
    p.forEach(function (v, k) {
      var name = k.slice(2), j = cols.findIndex(function (c) { return c.name === name; }), el = controls[name];
      if (k === 'q') { state.query = v; state.words = v.toLowerCase().split(/\s+/).filter(Boolean); $('wb-search').value = v; }
      else if (k === 'sort') { var s = cols.findIndex(function (c) { return c.name === v; }); state.sort = s >= 0 ? s : null; }
      else if (k === 'desc') state.desc = true;
      else if (k === 'page') page = Math.max(0, (+v || 1) - 1);
      else if (k === 'size' && +v > 0) { state.size = +v; $('wb-size').value = v; }
      else if (j >= 0 && el && k.startsWith('x.')) { state.filters[j] = {exact: true, value: v}; el.value = v; }
      else if (j >= 0 && el && k.startsWith('f.')) { state.filters[j] = v; el.value = v; }
    });
    state.page = page;
    if (state.words.length) loadSearch();
  }

  function fmt(v) {
    if (v === null || v === undefined) return '';
    if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(Math.round(v * 1e4) / 1e4);
    return String(v);
  }
  function levels(j) {
    var seen = new Map();
    rows.forEach(function (r) { var k = fmt(r[j]); seen.set(k, (seen.get(k) || 0) + 1); });
    return Array.from(seen.keys()).sort();
  }
  // a number filter: "> 3", "<=0.5", "=1", "2..5", or a number (equal)
  function numTest(text) {
    var t = text.replace(/\s+/g, ''), m;
    if ((m = t.match(/^(-?[\d.eE+-]+)\.\.(-?[\d.eE+-]+)$/))) {
      var lo = +m[1], hi = +m[2]; return function (v) { return v !== null && v >= lo && v <= hi; };
    }
    if ((m = t.match(/^(<=|>=|<|>|=|!=)?(-?[\d.eE+-]+)$/))) {
      var x = +m[2], op = m[1] || '=';
      return function (v) {
        if (v === null || v === undefined || v === '') return op === '!=';
        v = +v;
        return op === '<' ? v < x : op === '>' ? v > x : op === '<=' ? v <= x : op === '>=' ? v >= x :
               op === '!=' ? v !== x : v === x;
      };
    }
    return function (v) { return fmt(v).toLowerCase().indexOf(text.toLowerCase()) >= 0; };
  }
  function tests() {
    var out = [];
    Object.keys(state.filters).forEach(function (j) {
      var f = state.filters[j], c = cols[j];
      if (f === '' || f === undefined) return;
      if (f.exact) { out.push(function (r) { return fmt(r[j]) === f.value; }); return; }
      if (c.type === 'num') { var t = numTest(f); out.push(function (r) { return t(r[j]); }); return; }
      var low = f.toLowerCase();
      out.push(function (r) { return fmt(r[j]).toLowerCase().indexOf(low) >= 0; });
    });
    if (state.words.length) {
      if (!search) { out.push(function () { return false; }); }
      else out.push(function (r, i) {
        var text = search[i] || '';
        return state.words.every(function (w) { return text.indexOf(w) >= 0; });
      });
    }
    return out;
  }
  function matching() {
    var ts = tests(), idx = [];
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i], ok = true;
      for (var k = 0; k < ts.length && ok; k++) ok = ts[k](r, i);
      if (ok) idx.push(i);
    }
    if (state.sort !== null) {
      var j = state.sort, sgn = state.desc ? -1 : 1, num = cols[j].type !== 'text';
      idx.sort(function (a, b) {
        var x = rows[a][j], y = rows[b][j];
        if (x === null || x === undefined || x === '') return 1;
        if (y === null || y === undefined || y === '') return -1;
        if (num) { x = +x; y = +y; return x === y ? a - b : (x < y ? -sgn : sgn); }
        x = String(x); y = String(y); return x === y ? a - b : sgn * x.localeCompare(y, undefined, {numeric: true});
      });
    }
    return idx;
  }
  function head() {
    var tr = document.createElement('tr'), fr = document.createElement('tr');
    fr.className = 'wb-filters';
    cols.forEach(function (c, j) {
      var th = document.createElement('th');
      th.className = 'wb-sortable g-' + c.group; th.dataset.col = c.name; th.title = c.group + ': click to sort';
      th.textContent = c.name; th.addEventListener('click', function () {
        if (state.sort === j) state.desc = !state.desc; else { state.sort = j; state.desc = false; }
        draw();
      });
      tr.appendChild(th);
      var fh = document.createElement('th'), lv = levels(j), el;
      if (c.type === 'bool' || (c.type === 'text' && lv.length <= 60)) {
        el = document.createElement('select');
        var all = document.createElement('option'); all.value = '\u0000'; all.textContent = '(all)'; el.appendChild(all);
        lv.forEach(function (v) {
          var o = document.createElement('option'); o.value = v; o.textContent = v === '' ? '(blank)' : v; el.appendChild(o);
        });
        el.addEventListener('change', function () {
          state.filters[j] = el.value === '\u0000' ? '' : {exact: true, value: el.value}; state.page = 0; draw();
        });
      } else {
        el = document.createElement('input');
        el.placeholder = c.type === 'num' ? '>0, 1..5' : 'contains';
        el.addEventListener('input', function () { state.filters[j] = el.value.trim(); state.page = 0; draw(); });
      }
      el.dataset.col = c.name; el.setAttribute('aria-label', 'filter ' + c.name); controls[c.name] = el;
      fh.appendChild(el); fr.appendChild(fh);
    });
    var thead = $('wb-index').querySelector('thead');
    thead.appendChild(tr); thead.appendChild(fr);
  }
  function draw() {
    var idx = matching(), tbody = $('wb-index').querySelector('tbody');
    var pages = Math.max(1, Math.ceil(idx.length / state.size));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * state.size, shown = idx.slice(start, start + state.size);
    var frag = document.createDocumentFragment();
    shown.forEach(function (i) {
      var r = rows[i], tr = document.createElement('tr');
      cols.forEach(function (c, j) {
        var td = document.createElement('td');
        if (c.type !== 'text') td.className = 'wb-num';
        if (j === worldCol) {
          td.className = 'wb-world';
          var href = D.pages[i] || (server ? D.serverPages[i] : null);
          if (href) { var a = document.createElement('a'); a.href = href; a.textContent = fmt(r[j]); td.appendChild(a); }
          else { td.textContent = fmt(r[j]); td.title = 'no page for this world in this bundle (see the note above)'; }
        } else td.textContent = fmt(r[j]);
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    var note = state.words.length && !search ? ' (loading the search text ...)' : '';
    $('wb-count').textContent = (idx.length ? (start + 1) + '–' + (start + shown.length) : '0') + ' of ' +
      idx.length + ' matching worlds (' + rows.length + ' in all)' + note;
    $('wb-page').textContent = 'page ' + (state.page + 1) + ' of ' + pages;
    $('wb-prev').disabled = state.page === 0; $('wb-next').disabled = state.page >= pages - 1;
    saveHash();
  }
  function loadSearch() {
    if (search || searchLoading) return;
    searchLoading = true;
    var s = document.createElement('script');
    s.src = D.searchFile;
    s.onload = function () { search = window.WB_SEARCH || []; draw(); };
    s.onerror = function () { $('wb-count').textContent = 'the search text could not be loaded'; };
    document.body.appendChild(s);
  }
  head();
  loadHash();
  // a link to a state (the cells table's): start from no filter, apply it, show the rows
  window.addEventListener('hashchange', function () {
    if (location.hash.indexOf('=') < 0) return;
    state = {sort: null, desc: false, page: 0, size: state.size, filters: {}, words: [], query: ''};
    $('wb-search').value = '';
    Object.keys(controls).forEach(function (n) { var el = controls[n]; el.value = el.tagName === 'SELECT' ? '\u0000' : ''; });
    loadHash();
    draw();
    $('worlds').scrollIntoView();
  });
  $('wb-search').addEventListener('input', function (ev) {
    state.query = ev.target.value.trim();
    state.words = ev.target.value.toLowerCase().split(/\s+/).filter(Boolean); state.page = 0;
    if (state.words.length) loadSearch();
    draw();
  });
  $('wb-prev').addEventListener('click', function () { state.page--; draw(); });
  $('wb-next').addEventListener('click', function () { state.page++; draw(); });
  $('wb-size').addEventListener('change', function (ev) { state.size = +ev.target.value; state.page = 0; draw(); });
  draw();
  document.body.dataset.ready = '1';
})();
"""

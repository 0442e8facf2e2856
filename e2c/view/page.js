'use strict';
const DATA = JSON.parse(document.getElementById('e2c-data').textContent);
const S = {verdict: 'all', change: 'all', dataset: 'all', kind: 'all', sort: 'order', query: '',
           minTokens: 0, page: 0};
const hay = new Map();

function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : text(String(k)));
  }
  return e;
}
function text(s) { return document.createTextNode(s); }
function pre(cls, s) { const p = el('pre', cls); p.textContent = s; return p; }
function fold(summary, body, open) {
  const d = el('details', null, el('summary', null, summary));
  if (open) d.open = true;
  // Draw the body when first opened: a closed chain costs nothing.
  let drawn = false;
  const draw = () => { if (!drawn) { drawn = true; d.append(body()); } };
  if (open) draw(); else d.addEventListener('toggle', draw);
  return d;
}
function pct(x) { return (typeof x === 'number') ? (100 * x).toFixed(1) + '%' : '-'; }
function num(x) { return (typeof x === 'number') ? (Number.isInteger(x) ? String(x) : x.toFixed(2)) : '-'; }
function samplesOf(p) { return p.runs.flat(); }
function tokensOf(p) {
  const s = samplesOf(p);
  return s.length ? s.reduce((a, x) => a + (x.tokens || 0), 0) / s.length : 0;
}

function table(rows, cols) {
  const t = el('table');
  t.append(el('tr', null, ...cols.map(c => el('th', null, c[0]))));
  for (const r of rows) t.append(el('tr', null, ...cols.map(c => el('td', null, c[1](r)))));
  return t;
}
function settingsTable(obj) {
  const rows = Object.entries(obj || {});
  return table(rows, [['setting', r => r[0]],
                      ['value', r => (typeof r[1] === 'object' && r[1] !== null) ? JSON.stringify(r[1]) : String(r[1])]]);
}
function summaryOf(run) {
  if (run.type === 'tts') {
    const rows = Array.isArray(run.summary.methods) ? run.summary.methods : [];
    return table(rows, [['method', r => r.method], ['budget', r => num(r.budget)], ['problems', r => num(r.problems)],
                        ['accuracy', r => pct(r.accuracy)], ['tokens (k)', r => num(r.tokens_k)],
                        ['calls', r => num(r.calls)]]);
  }
  const rows = Object.entries(run.summary.datasets || {});
  if (run.summary.finished === false) return el('p', 'missing', 'no results.json: the run stopped before its summary; its predictions so far are below');
  return table(rows, [['dataset', r => r[0]], ['problems', r => num(r[1].problems)],
                      ['pass@1', r => pct(r[1]['pass@1'])], ['format', r => pct(r[1].format_rate)],
                      ['truncated', r => pct(r[1].truncation_rate)], ['no answer', r => pct(r[1].no_answer_rate)],
                      ['explore tok', r => num(r[1].explore_tokens)], ['execute tok', r => num(r[1].execute_tokens)]]);
}
function drawHead() {
  const h = document.getElementById('head');
  h.append(el('h1', null, DATA.runs.map(r => r.label).join(' vs ')));
  if (DATA.paired) {
    const p = DATA.paired;
    const sign = (p.mean >= 0 ? '+' : '');
    h.append(el('p', 'paired', `${DATA.runs[1].label} - ${DATA.runs[0].label}, paired over ${p.n} problems: `,
      el('b', null, `${sign}${(100 * (p.mean || 0)).toFixed(1)} points (SE ${(100 * (p.se || 0)).toFixed(1)})`),
      `; gained ${p.gained.length}, lost ${p.lost.length}` + (p.exceeds_2se ? '; more than 2 SE' : '')));
    if (DATA.left_out) {
      h.append(el('p', 'left-out', `Compared on the problems both runs hold; left out: ${DATA.left_out.first} only in ` +
        `${DATA.runs[0].label}, ${DATA.left_out.second} only in ${DATA.runs[1].label}.`));
    }
    const per = Object.entries(p.datasets || {});
    if (per.length > 1) {
      h.append(table(per, [['dataset', r => r[0]], ['problems', r => num(r[1].n)],
        ['difference', r => (100 * (r[1].mean || 0)).toFixed(1) + ' pts'], ['SE', r => (100 * (r[1].se || 0)).toFixed(1)],
        ['improved', r => num(r[1].improved)], ['worsened', r => num(r[1].worsened)]]));
    }
  }
  for (const run of DATA.runs) {
    h.append(el('div', 'run', el('h2', null, `${run.label} (${run.type}): `, el('span', 'meta', run.path)),
      summaryOf(run), fold('settings', () => settingsTable(run.settings), false)));
  }
}

function choices(key) { return ['all', ...new Set(DATA.problems.map(p => p[key]).filter(x => x))]; }
function select(label, key, opts) {
  const s = el('select');
  for (const [v, t] of opts) { const o = el('option', null, t); o.value = v; s.append(o); }
  s.value = S[key];
  s.addEventListener('change', () => { S[key] = s.value; S.page = 0; drawList(); });
  return el('label', null, label + ' ', s);
}
function drawControls() {
  const c = document.getElementById('controls');
  c.append(select('verdict', 'verdict', [['all', 'all'], ['correct', 'has a correct sample'],
    ['wrong', 'has a wrong sample'], ['malformed', 'has a malformed chain'], ['truncated', 'has a truncated chain']]));
  if (DATA.mode === 'compare') {
    c.append(select('change', 'change', [['all', 'all'], ['gained', 'gained'], ['lost', 'lost'],
      ['changed', 'gained or lost'], ['same', 'same']]));
  }
  c.append(select('dataset', 'dataset', choices('dataset').map(x => [x, x])));
  c.append(select('kind', 'kind', choices('kind').map(x => [x, x])));
  c.append(select('sort', 'sort', [['order', 'run order'], ['tokens-desc', 'tokens, most first'],
    ['tokens-asc', 'tokens, fewest first'], ['id', 'id']]));
  const mt = el('input'); mt.type = 'number'; mt.min = '0'; mt.value = '0'; mt.style.width = '6em';
  mt.addEventListener('input', () => { S.minTokens = Number(mt.value) || 0; S.page = 0; drawList(); });
  c.append(el('label', null, 'min tokens ', mt));
  const q = el('input'); q.type = 'search'; q.placeholder = 'search ids, problems, answers, chains';
  q.addEventListener('input', () => { S.query = q.value.toLowerCase(); S.page = 0; drawList(); });
  c.append(el('label', null, q));
  c.append(el('span', null, el('button', 'prev', 'previous'), el('span', 'pageinfo', ''), el('button', 'next', 'next')));
  c.querySelector('.prev').addEventListener('click', () => { if (S.page > 0) { S.page--; drawList(); } });
  c.querySelector('.next').addEventListener('click', () => { S.page++; drawList(); });
}

function haystack(p) {
  let h = hay.get(p.key);
  if (h === undefined) {
    const parts = [p.key, p.problem || '', String(p.gold ?? '')];
    for (const s of samplesOf(p)) parts.push(String(s.extracted ?? ''), s.reason || '', s.response || '');
    h = parts.join('\n').toLowerCase();
    hay.set(p.key, h);
  }
  return h;
}
function keep(p) {
  const s = samplesOf(p);
  if (S.verdict === 'correct' && !s.some(x => x.correct)) return false;
  if (S.verdict === 'wrong' && !s.some(x => !x.correct)) return false;
  if (S.verdict === 'malformed' && !s.some(x => x.malformed)) return false;
  if (S.verdict === 'truncated' && !s.some(x => x.truncated)) return false;
  if (S.change === 'changed' && !(p.change === 'gained' || p.change === 'lost')) return false;
  if (['gained', 'lost', 'same'].includes(S.change) && p.change !== S.change) return false;
  if (S.dataset !== 'all' && p.dataset !== S.dataset) return false;
  if (S.kind !== 'all' && p.kind !== S.kind) return false;
  if (S.minTokens > 0 && tokensOf(p) < S.minTokens) return false;
  if (S.query && !haystack(p).includes(S.query)) return false;
  return true;
}
function ordered(list) {
  if (S.sort === 'tokens-desc') return list.slice().sort((a, b) => tokensOf(b) - tokensOf(a));
  if (S.sort === 'tokens-asc') return list.slice().sort((a, b) => tokensOf(a) - tokensOf(b));
  if (S.sort === 'id') return list.slice().sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  return list;
}

function phase(label, content, openTag, closeTag, present, closed, cls) {
  const box = el('div', 'phase');
  if (!present) { box.append(el('div', 'missing', `no ${label} (${openTag} missing)`)); return box; }
  box.append(el('div', 'tag', openTag));
  box.append(content.length > 3000 ? fold(`${label}: ${content.length} characters`, () => pre(cls, content), false)
                                   : pre(cls, content));
  box.append(closed ? el('div', 'tag', closeTag) : el('div', 'missing', `${closeTag} missing`));
  return box;
}
function cut(s, span) { return span ? s.response.slice(span[0], span[1]) : ''; }
function chainBody(s, t) {
  const c = s.chain, box = el('div', 'chain');
  box.append(phase('exploration', cut(s, c.explore), t[0], t[1], c.has_exploration, c.explore_closed, 'explore'));
  box.append(phase('execution', cut(s, c.execute), t[2], t[3], c.has_execution, c.execute_closed, 'execute'));
  if (c.trailing && c.trailing.trim()) box.append(el('div', 'missing', 'text after the chain:'), pre('trailing', c.trailing));
  if (!c.has_exploration && !c.has_execution) box.append(pre('raw', s.response));
  box.append(fold('raw response', () => pre('raw', s.response), false));
  return box;
}
function drawSample(s, tags) {
  const d = el('div', 'sample ' + (s.correct ? 'right' : 'wrong'));
  const line = el('div', null, el('b', null, s.label + ' '),
    el('span', 'badge ' + (s.correct ? 'right' : 'wrong'), s.correct ? 'correct' : 'wrong'));
  if (s.reason && s.reason !== 'correct' && s.reason !== 'wrong') line.append(el('span', 'badge', s.reason));
  if (s.malformed) line.append(el('span', 'badge malformed', 'malformed: ' + s.chain_status));
  if (s.truncated) line.append(el('span', 'badge truncated', 'truncated'));
  if (s.forced_close) line.append(el('span', 'badge', 'exploration closed by budget'));
  d.append(line);
  d.append(el('div', 'meta', 'answer: ', el('code', null, s.extracted === null || s.extracted === undefined ? '(none)' : String(s.extracted))));
  const tok = [`tokens: exploration ${num(s.explore_tokens)}, execution ${num(s.execute_tokens)}, total ${num(s.tokens)}`];
  if (s.finish_reason) tok.push(`finish: ${s.finish_reason}`);
  if (s.explore_stop) tok.push(`exploration ended by: ${s.explore_stop}`);
  d.append(el('div', 'meta', tok.join('; ')));
  if ('tests_total' in s) {
    d.append(el('div', 'meta', `tests passed: ${num(s.tests_passed)} / ${num(s.tests_total)}` +
      (typeof s.sandbox_s === 'number' ? ` (${s.sandbox_s.toFixed(2)} s in the sandbox)` : '')));
    d.append(s.program ? fold('program', () => pre('program', s.program), false) : el('div', 'missing', 'no program found'));
  }
  if (Array.isArray(s.votes)) d.append(el('div', 'meta', 'votes: ', el('code', null, s.votes.map(v => v === null ? '(none)' : String(v)).join(' | '))));
  if (s.candidates) d.append(fold('candidates', () => pre('raw', JSON.stringify(s.candidates, null, 1)), false));
  if (s.details && Object.keys(s.details).length) d.append(fold('details', () => pre('raw', JSON.stringify(s.details, null, 1)), false));
  const size = (s.response || '').length;
  d.append(fold(`chain: ${s.chain.status} (${size} characters)`, () => chainBody(s, tags), size <= 1500));
  return d;
}
function drawProblem(p) {
  const box = el('section', 'problem');
  const h = el('h3', null, `${p.dataset} / ${p.id} `);
  if (p.kind) h.append(el('span', 'badge', p.kind));
  if (p.change) h.append(el('span', 'badge ' + p.change, p.change));
  h.append(el('span', 'meta', ' accuracy: ' + p.scores.map(pct).join(' -> ')));
  box.append(h);
  if (p.problem) box.append(p.problem.length > 1500 ? fold('problem', () => pre('problem-text', p.problem), false) : pre('problem-text', p.problem));
  else box.append(el('div', 'meta', `problem text not in the run's files (id ${p.id})`));
  const gold = p.gold === null || p.gold === undefined ? '(not recorded)' : String(p.gold);
  box.append(gold.length > 200 ? fold('gold answer', () => pre('gold', gold), false) : el('div', null, 'gold: ', el('code', null, gold)));
  const cols = el('div', 'cols');
  cols.style.gridTemplateColumns = `repeat(${p.runs.length}, minmax(0, 1fr))`;
  p.runs.forEach((samples, i) => {
    const col = el('div', 'col');
    if (p.runs.length > 1) col.append(el('h4', null, DATA.runs[i].label));
    for (const s of samples) col.append(drawSample(s, DATA.runs[i].tags));
    cols.append(col);
  });
  box.append(cols);
  return box;
}
function drawList() {
  const shown = ordered(DATA.problems.filter(keep));
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  S.page = Math.min(S.page, pages - 1);
  const main = document.getElementById('problems');
  main.replaceChildren();
  for (const p of shown.slice(S.page * PAGE_SIZE, (S.page + 1) * PAGE_SIZE)) main.append(drawProblem(p));
  if (!shown.length) main.append(el('p', null, 'no problem matches'));
  document.querySelector('.pageinfo').textContent =
    ` page ${S.page + 1} of ${pages} (${shown.length} of ${DATA.problems.length} problems) `;
}
drawHead();
drawControls();
drawList();

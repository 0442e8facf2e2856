// A minimal DOM, enough to run the page script of e2c.view under node (test_view_cpu.py): elements with
// children, text nodes, textContent, className, listeners, select values. Using innerHTML throws, so a
// script that ever inserts markup fails the test. After the page script, the caller's driver runs.
'use strict';
class NodeShim {
  constructor() { this.childNodes = []; this.parentNode = null; }
  append(...kids) {
    for (const k of kids) {
      const n = (typeof k === 'string') ? new TextShim(k) : k;
      n.parentNode = this;
      this.childNodes.push(n);
    }
  }
  replaceChildren(...kids) { this.childNodes = []; this.append(...kids); }
  get textContent() { return this.childNodes.map(c => c.textContent).join(''); }
  set textContent(v) { this.childNodes = []; this.append(new TextShim(String(v))); }
}
class TextShim extends NodeShim {
  constructor(s) { super(); this.data = s; }
  get textContent() { return this.data; }
  set textContent(v) { this.data = String(v); }
  html() { return this.data.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'); }
}
class ElementShim extends NodeShim {
  constructor(tag) { super(); this.tagName = tag; this.className = ''; this.style = {}; this.listeners = {}; this.open = false; this.value = ''; }
  addEventListener(type, f) { (this.listeners[type] = this.listeners[type] || []).push(f); }
  fire(type) { for (const f of this.listeners[type] || []) f({target: this}); }
  set innerHTML(v) { throw new Error('innerHTML used'); }
  get innerHTML() { throw new Error('innerHTML used'); }
  insertAdjacentHTML() { throw new Error('insertAdjacentHTML used'); }
  all(pred, out = []) {
    for (const k of this.childNodes) {
      if (k instanceof ElementShim) { if (pred(k)) out.push(k); k.all(pred, out); }
    }
    return out;
  }
  querySelector(sel) { return this.all(e => e.className.split(' ').includes(sel.slice(1)))[0] || null; }
  html() {
    const cls = this.className ? ` class="${this.className}"` : '';
    return `<${this.tagName}${cls}>` + this.childNodes.map(c => c.html()).join('') + `</${this.tagName}>`;
  }
}
const ROOT = new ElementShim('body');
const IDS = {};
for (const id of ['head', 'controls', 'problems']) { IDS[id] = new ElementShim('div'); ROOT.append(IDS[id]); }
globalThis.Node = NodeShim;
globalThis.document = {
  title: 'unchanged',
  getElementById: id => id === 'e2c-data' ? {textContent: globalThis.PAGE_DATA} : IDS[id],
  createElement: tag => new ElementShim(tag),
  createTextNode: s => new TextShim(s),
  querySelector: sel => ROOT.querySelector(sel),
  write() { throw new Error('document.write used'); },
};
globalThis.alert = () => { throw new Error('alert ran'); };

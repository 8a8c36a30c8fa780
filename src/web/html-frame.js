// Shows one HTML result (a DataFrame's table, SVG...) for petri's web page
// (docs/web.md), and tells the page how tall it is.
//
// This runs in <iframe sandbox="allow-scripts"> without allow-same-origin:
// an opaque origin, so it reaches neither the page nor its storage and key,
// and its policy lets it connect nowhere.  The HTML came out of a sandbox
// and must not run:
//   - DOMParser builds it in a document that runs nothing, and marks its
//     <script> elements as already started: moved here they never run,
//     inline or with a src (which the policy's 'self' would allow);
//   - the frame's policy runs no inline script, no on* handler, no
//     javascript: URL and no eval, whatever this file does;
//   - <meta> (a refresh), <base> and <link> are dropped, and a click on a
//     link does nothing: the frame stays on this page and asks for nothing.
// The frame tells the page one thing: its content's height, a number.
'use strict';

(() => {
  const HTML_MAX = 32 << 20;
  let done = false, told = -1;

  // The content's height, and the sideways scroll bar's when the content is
  // wider than the frame (a describe() of many columns).
  function tellHeight() {
    const root = document.documentElement;
    const h = Math.ceil(root.getBoundingClientRect().height + window.innerHeight - root.clientHeight);
    if (h === told) return;
    told = h;
    window.parent.postMessage({ petri: 'html-size', height: h }, '*');
  }

  // The children of a node of the parsed document, now this document's (a
  // copy of the list first: adopting takes each out of the live one).
  function adopt(parent) {
    return Array.from(parent.childNodes).map((n) => document.adoptNode(n));
  }

  function show(html) {
    const doc = new DOMParser().parseFromString(html, 'text/html');
    for (const n of doc.querySelectorAll('meta, base, link')) n.remove();
    document.head.append(...adopt(doc.head));
    document.body.replaceChildren(...adopt(doc.body));
    // Images decode, the frame is resized: the height follows.
    new ResizeObserver(tellHeight).observe(document.documentElement);
    tellHeight();
  }

  document.addEventListener('click', (ev) => {
    if (ev.target instanceof Element && ev.target.closest('a, area')) ev.preventDefault();
  }, true);

  window.addEventListener('message', (ev) => {
    const m = ev.data;
    if (done || ev.source !== window.parent || !m || m.petri !== 'html' ||
        typeof m.html !== 'string' || m.html.length > HTML_MAX)
      return;
    done = true;
    show(m.html);
  });
})();

// A list that arrives a page at a time: the items so far, a "Load more"
// button while there are more, and a count said politely. Knowledge and the
// decisions list use it.

import { h } from "./dom.js";

// `load(after)` returns a connection page ({edges, pageInfo}); `card(node)`
// renders one item; `counted(n)` says how many are shown (n may be 0).
export function pagedList(load, card, counted) {
  const list = h("ul", { class: "cards" });
  const more = h("button", { type: "button", class: "btn" }, "Load more");
  const counter = h("p", { class: "muted", "aria-live": "polite", tabindex: "-1" });
  let after = null;
  let shown = 0;

  async function page() {
    const conn = await load(after);
    for (const { node } of conn.edges) {
      list.append(h("li", {}, card(node)));
      shown += 1;
    }
    after = conn.pageInfo.endCursor;
    more.hidden = !conn.pageInfo.hasNextPage;
    counter.textContent = counted(shown);
  }
  more.addEventListener("click", async () => {
    more.disabled = true;
    const firstNew = list.children.length;
    try {
      await page();
    } finally {
      more.disabled = false;
    }
    // the last page hides the button, which had the focus: the keyboard
    // goes on at the first item it brought (or the count), not at <body>
    if (more.hidden) {
      const arrived = list.children[firstNew];
      (arrived ? arrived.querySelector("a") : counter).focus();
    }
  });
  return { list, more, counter, page };
}

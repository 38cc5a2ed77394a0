// A list that arrives a page at a time: the items so far, a "Load more"
// button while there are more, and a count said politely. Knowledge and the
// decisions list use it.

import { h, isBusy, notice, setBusy } from "./dom.js";

// `load(after)` returns a connection page ({edges, pageInfo}); `card(node)`
// renders one item; `counted(n)` says how many are shown (n may be 0).
export function pagedList(load, card, counted) {
  const list = h("ul", { class: "cards" });
  const more = h("button", { type: "button", class: "btn" }, "Load more");
  const counter = h("p", { class: "muted", "aria-live": "polite", tabindex: "-1" });
  const failure = h("div", {});
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
    if (isBusy(more)) return;
    setBusy(more, true);
    failure.replaceChildren();
    const firstNew = list.children.length;
    try {
      await page();
    } catch (error) {
      // said beside the button, which stays for another try (the failure
      // was an uncaught page error, the keyboard left on <body>)
      failure.replaceChildren(notice("error", error.message));
    } finally {
      setBusy(more, false);
      if (document.activeElement === document.body && !more.hidden) more.focus();
    }
    // the last page hides the button, which had the focus: the keyboard
    // goes on at the first item it brought (or the count), not at <body>
    if (more.hidden) {
      const arrived = list.children[firstNew];
      (arrived ? arrived.querySelector("a") : counter).focus();
    }
  });
  return { list, more, failure, counter, page };
}

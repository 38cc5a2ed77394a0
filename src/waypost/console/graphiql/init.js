// GraphiQL from this package's vendored files (no CDN). Queries go to
// /graphql with the headers from the headers pane; when this tab is signed
// in to the console, its token is filled in. Headers are not persisted, but
// GraphiQL's query history and tabs keep the headers each query ran with,
// so GraphiQL keeps its state in this tab's sessionStorage (where the
// console keeps the token, and which its sign-out clears), never in
// localStorage, which outlives the tab and the sign-out.
(function () {
  "use strict";
  var token = null;
  var storage = null;
  try {
    storage = window.sessionStorage;
    token = storage.getItem("waypost.token");
    // what earlier versions let GraphiQL keep in localStorage (its
    // "graphiql:" keys: history and tabs, with their headers) goes
    Object.keys(window.localStorage).forEach(function (key) {
      if (key.indexOf("graphiql:") === 0) window.localStorage.removeItem(key);
    });
  } catch (error) {
    token = null;
  }
  var headers = JSON.stringify({ Authorization: "Bearer " + (token || "wp_...") }, null, 2);
  var fetcher = window.GraphiQL.createFetcher({ url: "/graphql" });
  var root = window.ReactDOM.createRoot(document.getElementById("graphiql"));
  root.render(
    window.React.createElement(window.GraphiQL, {
      fetcher: fetcher,
      defaultHeaders: headers,
      headers: headers,
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
      storage: storage || undefined,
      defaultEditorToolsVisibility: "headers",
      defaultQuery: "# Put your token in the Headers pane below, then run:\n{\n  me { name kind }\n  projects(first: 10) { edges { node { restId name } } }\n}\n",
    })
  );
})();

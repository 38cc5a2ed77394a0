// GraphiQL from this package's vendored files (no CDN). Queries go to
// /graphql with the headers from the headers pane; when this tab is signed
// in to the console, its token is filled in. Headers are not persisted.
(function () {
  "use strict";
  var token = null;
  try {
    token = window.sessionStorage.getItem("waypost.token");
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
      defaultEditorToolsVisibility: "headers",
      defaultQuery: "# Put your token in the Headers pane below, then run:\n{\n  me { name kind }\n  projects(first: 10) { edges { node { restId name } } }\n}\n",
    })
  );
})();

// Renders pymdownx.arithmatex's output (generic mode: \( \) inline, \[ \] display) with the KaTeX
// copy shipped in docs/vendor/katex, so the site needs no network; re-runs on every page of
// mkdocs-material's instant navigation.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true }
    ],
    throwOnError: false
  })
})

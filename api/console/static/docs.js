// The API's documentation page (/docs): Swagger UI over the API's own /openapi.json. A file of its own, since the
// console's Content-Security-Policy runs no inline script.
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapi,
    dom_id: "#swagger-ui",
    deepLinking: true,
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis],
    showExtensions: true,
    showCommonExtensions: true
  });
});

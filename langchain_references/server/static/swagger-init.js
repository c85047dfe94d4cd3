// Starts Swagger UI on the /docs page (a file, so that the page's CSP needs no inline script).
// The OpenAPI document's URL comes from the page, in #swagger-ui's data-openapi-url.
"use strict";
(function () {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis],
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null, // no badge fetched from a validator service
  });
})();

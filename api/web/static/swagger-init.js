// Starts Swagger UI on /schema from the app's own files; no validator badge (it would
// call an outside host).
"use strict";
(function () {
  var root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    validatorUrl: null,
    deepLinking: true,
  });
})();

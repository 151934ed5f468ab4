// capbook: let the Jupyter widgets of the static pages work with MathJax 3.
//
// The widget controls in @jupyter-widgets/html-manager typeset their labels with the MathJax 2
// call `MathJax.Hub.Queue(["Typeset", MathJax.Hub, el])` whenever `window.MathJax` exists. The
// site serves MathJax 3, which has no `Hub`, so every slider threw "Cannot read properties of
// undefined (reading 'Queue')" and the widget area stayed empty. This script (loaded before
// everything else) gives whatever object `window.MathJax` holds -- Sphinx's configuration first,
// then MathJax 3 itself -- a hidden `Hub.Queue` that forwards to MathJax 3's typesetPromise.
(function () {
  "use strict";
  var current = window.MathJax;
  function queue(job) {
    var el = Array.isArray(job) && job.length > 2 ? job[2] : null;
    var mj = current;
    if (!mj || typeof mj.typesetPromise !== "function") {
      return; // MathJax 3 not loaded yet: it typesets the whole page when it starts
    }
    var ready = (mj.startup && mj.startup.promise) || Promise.resolve();
    ready.then(function () {
      return mj.typesetPromise(el ? [el] : undefined);
    }).catch(function (err) {
      console.warn("capbook: MathJax could not typeset a widget label", err);
    });
  }
  function patch(obj) {
    if (obj && typeof obj === "object" && !Object.prototype.hasOwnProperty.call(obj, "Hub")) {
      // Not enumerable: MathJax 3 copies a configuration object's keys into its config.
      Object.defineProperty(obj, "Hub", {value: {Queue: queue}, enumerable: false, configurable: true});
    }
    return obj;
  }
  patch(current);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = patch(value); }
  });
})();

// Injected by tests/html.rs into a copy of a page before Chromium loads it: records errors
// (uncaught, console.error) of the page and of its flame-graph frames, and what every plot and
// flame graph drew, into <pre id="nesquic-test"> for --dump-dom.
(function () {
  var errors = [];
  function watch(w, where) {
    w.addEventListener("error", function (e) { errors.push(where + ": " + e.message); });
    var original = w.console.error;
    w.console.error = function () {
      errors.push(where + ": console.error " + Array.prototype.join.call(arguments, " "));
      original.apply(w.console, arguments);
    };
  }
  watch(window, "page");
  function colourful(value) {
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(value || "");
    return !!m && !(m[1] === m[2] && m[2] === m[3]);
  }
  window.addEventListener("load", function () {
    setTimeout(function () {
      var out = { errors: errors, plots: [], flames: [] };
      document.querySelectorAll("figure.plot").forEach(function (f) {
        var shapes = f.querySelectorAll("svg rect, svg circle, svg polyline, svg path, svg polygon, svg line");
        var coloured = 0;
        shapes.forEach(function (s) {
          if (colourful(s.getAttribute("fill")) || colourful(s.getAttribute("stroke"))) coloured++;
        });
        var svg = f.querySelector("svg");
        out.plots.push({ name: f.dataset.plot, points: +f.dataset.points, coloured: coloured,
                         width: svg ? svg.getBoundingClientRect().width : 0 });
      });
      document.querySelectorAll("figure.flame iframe").forEach(function (i) {
        var d = i.contentDocument;
        var frames = d && d.getElementById("frames");
        // Click the widest frame below the root: the graph zooms (its reset button shows).
        var frame = frames && frames.querySelectorAll("g")[1];
        if (frame) frame.dispatchEvent(new MouseEvent("click", { bubbles: true, view: i.contentWindow }));
        var unzoom = d && d.getElementById("unzoom");
        out.flames.push({ name: i.parentNode.dataset.flame,
                          total: frames ? +frames.getAttribute("total_samples") : -1,
                          frames: frames ? frames.querySelectorAll("g").length : 0,
                          zoomed: !!unzoom && !unzoom.classList.contains("hide"),
                          width: frames ? frames.getBoundingClientRect().width : 0 });
      });
      var pre = document.createElement("pre");
      pre.id = "nesquic-test";
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    }, 300);
  });
})();

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireBrowser returns the path of Browser, or skips the test when there is none, except
// with ZARIS_REQUIRE_CHROMIUM=1 (as in CI), where a missing browser is a failure.
func requireBrowser(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	path, err := findBrowser()
	if err != nil {
		if os.Getenv("ZARIS_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("%v, but ZARIS_REQUIRE_CHROMIUM=1", err)
		}
		t.Skipf("%v; set ZARIS_REQUIRE_CHROMIUM=1 to fail instead", err)
	}
	return path
}

// browserReport is a report as a run with every churn kind once would give: a steady phase
// and one phase per event, 3 seconds apart, and retried attempts of every coloured cause
// and of two causes that take the fallback colours, in the seconds after each event.
func browserReport() *Report {
	causes := append(slices.Sorted(maps.Keys(causeColors)), "partition unavailable", "deadline exceeded")
	r := &Report{Nodes: 3, Workers: 16, Protocol: "binary", Duration: "20s",
		Phases: []PhaseReport{{Name: "steady", Retries: map[string]int{}}}}
	seconds := 3*len(kinds) + 3
	for i, k := range kinds {
		label := fmt.Sprintf("%s n%d", k, i%3+1)
		r.Events = append(r.Events, EventReport{Kind: k, Label: label, AtSec: float64(3*i + 2), TookMs: 40})
		r.Phases = append(r.Phases, PhaseReport{Name: label, StartSec: float64(3*i + 2), Retries: map[string]int{}})
	}
	for t := range seconds {
		s := Second{T: t, Ops: 25000 + 1000*(t%4), P99Ms: 4 + float64(t%5), Retries: map[string]int{}}
		if t >= 2 {
			for j, c := range causes {
				if (t+j)%3 != 0 {
					s.Retries[c] = 1 + (t+j)%4
					r.Phases[min((t-2)/3+1, len(r.Phases)-1)].Retries[c] += s.Retries[c]
				}
			}
		}
		r.Timeline = append(r.Timeline, s)
	}
	return r
}

// probeHead is put first in the page's head: it collects every error the page raises (a
// script error, a resource that did not load, a rejected promise, a blocked resource) and
// every console error or warning, for probeBody to report.
const probeHead = `<script>
window.zarisErrors = [];
window.addEventListener("error", e => zarisErrors.push("error: " + (e.message || (e.target && (e.target.src || e.target.href || e.target.tagName)))), true);
window.addEventListener("unhandledrejection", e => zarisErrors.push("unhandled rejection: " + e.reason));
document.addEventListener("securitypolicyviolation", e => zarisErrors.push("blocked: " + e.blockedURI));
for (const level of ["error", "warn"]) {
  const log = console[level];
  console[level] = (...args) => { zarisErrors.push("console." + level + ": " + args.join(" ")); log.apply(console, args); };
}
</script>`

// probeBody is put last in the page's body: it reads the computed style and the geometry of
// each chart's series, legend entry and event marker, the tables' rows, the page's scripts
// and the resources it loaded, and writes them as JSON into a pre#zaris-probe element.
const probeBody = `<script>
(() => {
  const found = {};
  try {
    const style = el => {
      const s = getComputedStyle(el), b = el.getBBox();
      return {fill: s.fill, stroke: s.stroke, strokeWidth: parseFloat(s.strokeWidth), fillOpacity: parseFloat(s.fillOpacity),
        opacity: parseFloat(s.opacity), display: s.display, visibility: s.visibility, x: b.x, y: b.y, w: b.width, h: b.height};
    };
    found.panels = [...document.querySelectorAll("svg g.panel")].map(g => ({
      metric: g.dataset.metric,
      series: [...g.querySelectorAll(".series")].map(el => ({tag: el.tagName, cause: el.dataset.cause || "", ...style(el)})),
    }));
    found.legend = [...document.querySelectorAll("svg g.legend")].map(g => ({cause: g.dataset.cause, text: g.textContent, ...style(g.querySelector("rect"))}));
    found.events = [...document.querySelectorAll("svg g.event")].map(g => ({kind: g.dataset.event, label: g.querySelector("text").textContent, ...style(g.querySelector("line"))}));
    const axis = document.querySelector("svg g.panel line.axis").getBBox();
    found.plot = {left: axis.x, right: axis.x + axis.width};
    const svg = document.querySelector("svg").getBoundingClientRect();
    found.svg = {left: svg.left + scrollX, top: svg.top + scrollY};
    found.tables = [...document.querySelectorAll("table")].map(t => [...t.querySelectorAll("tr")].filter(r => r.querySelector("td")).map(r => r.cells[0].textContent));
    found.scripts = document.scripts.length;
    found.resources = performance.getEntriesByType("resource").map(e => e.name);
  } catch (e) {
    zarisErrors.push("probe: " + e);
  }
  found.errors = zarisErrors;
  const pre = document.createElement("pre");
  pre.id = "zaris-probe";
  pre.textContent = JSON.stringify(found);
  document.body.appendChild(pre);
})();
</script>`

// style is an element's computed style and bounding box, as probeBody reports it.
type style struct {
	Fill, Stroke, Display, Visibility string
	StrokeWidth, FillOpacity, Opacity float64
	X, Y, W, H                        float64
}

// probed is what probeBody found in the page.
type probed struct {
	Panels []struct {
		Metric string
		Series []struct {
			Tag, Cause string
			style
		}
	}
	Legend []struct {
		Cause, Text string
		style
	}
	Events []struct {
		Kind, Label string
		style
	}
	Plot      struct{ Left, Right float64 }
	SVG       struct{ Left, Top float64 } // in the page's pixels
	Tables    [][]string
	Scripts   int
	Resources []string
	Errors    []string
}

// visible reports whether s is shown at all.
func (s style) visible() bool {
	return s.Display != "none" && s.Visibility == "visible" && s.Opacity > 0
}

// probePage loads page (HTML) with the probe in the browser at path, in a window the size
// WriteScreenshot draws r's page in, and returns what the probe found and the browser's log
// lines of the page's console.
func probePage(t *testing.T, path, page string, r *Report) (probed, []string) {
	t.Helper()
	require.Equal(t, 1, strings.Count(page, "<head>"), "the page has one <head>")
	require.Equal(t, 1, strings.Count(page, "</body>"), "the page has one </body>")
	page = strings.Replace(page, "<head>", "<head>\n"+probeHead, 1)
	page = strings.Replace(page, "</body>", probeBody+"\n</body>", 1)
	file := filepath.Join(t.TempDir(), "timeline.html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 2*browserTimeout)
	defer cancel()
	dom, log, err := runBrowser(ctx, path, file, "--dump-dom", windowSize(r))
	require.NoError(t, err)
	m := regexp.MustCompile(`<pre id="zaris-probe">(.*?)</pre>`).FindSubmatch(dom)
	require.NotNil(t, m, "the probe wrote no findings; the page as the browser left it:\n%s\nits log:\n%s", dom, log)
	var found probed
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &found), "%s", m[1])
	var console []string
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, strings.TrimSpace(line))
		}
	}
	return found, console
}

// The timeline page, loaded in a browser, paints what the report holds: each chart has a
// visible series with an extent, the retries chart's bands are filled, each in its own colour
// and in the colour of its legend swatch, every churn event has its marker in the plot, the
// table has a row per phase, and the page raises no error, logs nothing, loads nothing and
// has no script of its own. The picture WriteScreenshot draws of it shows each band: the
// retries chart holds a band's worth of pixels of each cause's colour. Before the page's
// stylesheet painted the bands, its rule for the series (fill: none) left that chart empty.
func TestTimelineInBrowser(t *testing.T) {
	path := requireBrowser(t)
	r := browserReport()
	var page bytes.Buffer
	require.NoError(t, writeTimeline(&page, r))
	found, console := probePage(t, path, page.String(), r)

	assert.Empty(t, found.Errors, "errors the page raised")
	assert.Empty(t, console, "console messages in the browser's log")
	assert.Empty(t, found.Resources, "the page loads nothing")
	assert.Equal(t, 2, found.Scripts, "the page has no script but the probe's two")

	causes := map[string]bool{}
	for _, s := range r.Timeline {
		for c := range s.Retries {
			causes[c] = true
		}
	}
	metrics := []string{}
	bandFill := map[string]string{}
	for _, p := range found.Panels {
		metrics = append(metrics, p.Metric)
		require.NotEmpty(t, p.Series, "chart %s has no series", p.Metric)
		for _, s := range p.Series {
			what := p.Metric + " " + s.Tag + " " + s.Cause
			assert.True(t, s.visible(), "%s is hidden: %+v", what, s.style)
			assert.Positive(t, s.W, "%s has no width", what)
			assert.Positive(t, s.H, "%s has no height", what)
			switch p.Metric {
			case "retries":
				assert.Equal(t, "polygon", s.Tag)
				assert.NotEqual(t, "none", s.Fill, "%s is not filled", what)
				assert.Positive(t, s.FillOpacity, what)
				bandFill[s.Cause] = s.Fill
			default:
				assert.Equal(t, "polyline", s.Tag)
				assert.NotEqual(t, "none", s.Stroke, "%s is not stroked", what)
				assert.Positive(t, s.StrokeWidth, what)
			}
		}
	}
	require.Equal(t, []string{"ops", "p99", "retries"}, metrics, "the charts")
	assert.ElementsMatch(t, slices.Collect(maps.Keys(causes)), slices.Collect(maps.Keys(bandFill)), "a band per cause")

	legendFill := map[string]string{}
	for _, l := range found.Legend {
		assert.Equal(t, l.Cause, l.Text)
		assert.True(t, l.visible() && l.W > 0 && l.H > 0, "the legend swatch of %s is not shown: %+v", l.Cause, l.style)
		legendFill[l.Cause] = l.Fill
	}
	assert.Equal(t, bandFill, legendFill, "each band is filled in the colour its legend shows")
	distinct := map[string]bool{}
	for _, f := range bandFill {
		distinct[f] = true
	}
	assert.Len(t, distinct, len(bandFill), "each cause has a colour of its own: %v", bandFill)

	require.Len(t, found.Events, len(r.Events), "a marker per churn event")
	for i, e := range r.Events {
		m := found.Events[i]
		assert.Equal(t, string(e.Kind), m.Kind)
		assert.Equal(t, e.Label, m.Label)
		assert.True(t, m.visible() && m.Stroke != "none" && m.H > 0, "the marker of %s is not drawn: %+v", e.Label, m.style)
		assert.True(t, m.X >= found.Plot.Left && m.X <= found.Plot.Right, "the marker of %s at x=%v is outside the plot %+v", e.Label, m.X, found.Plot)
	}

	var phases []string
	for _, p := range r.Phases {
		phases = append(phases, p.Name)
	}
	require.Len(t, found.Tables, 1)
	assert.Equal(t, phases, found.Tables[0], "a table row per phase")

	dir := t.TempDir()
	require.NoError(t, r.writeFiles(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 2*browserTimeout)
	defer cancel()
	shot, err := WriteScreenshot(ctx, r, dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "timeline.png"), shot)
	assertBandsInPicture(t, shot, found)
}

// assertBandsInPicture checks that the picture file of the page the probe found holds, in
// the retries chart, a band's worth of pixels (over a thousand; a band of browserReport has
// about ten thousand, an antialiased line a few hundred) of each band's colour, as the
// probe found it, painted over white with the band's fill opacity.
func assertBandsInPicture(t *testing.T, file string, found probed) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	// The retries chart inside its axes: the picture's pixels are the page's.
	top := int(found.SVG.Top) + marginTop + 2*(panelHeight+panelGap)
	left := int(found.SVG.Left)
	chart := image.Rect(left+marginLeft+2, top+2, left+chartWidth-marginRight-2, top+panelHeight-2)
	require.True(t, chart.In(img.Bounds()), "the retries chart %v is in the picture %v", chart, img.Bounds())
	seen := map[color.NRGBA]int{}
	for y := chart.Min.Y; y < chart.Max.Y; y++ {
		for x := chart.Min.X; x < chart.Max.X; x++ {
			seen[color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)]++
		}
	}
	for _, s := range found.Panels[len(found.Panels)-1].Series {
		if s.Fill == "none" {
			continue // not painted, as the probe's checks said
		}
		want := overWhite(t, s.Fill, s.FillOpacity)
		n := 0
		for c, count := range seen {
			if near(c, want) {
				n += count
			}
		}
		assert.Greater(t, n, 1000, "pixels of %s's colour %s at opacity %v (%v) in the retries chart of the picture", s.Cause, s.Fill, s.FillOpacity, want)
	}
}

// overWhite returns the CSS colour rgb (as "rgb(r, g, b)") painted with opacity over white.
func overWhite(t *testing.T, rgb string, opacity float64) color.NRGBA {
	var r, g, b uint8
	_, err := fmt.Sscanf(rgb, "rgb(%d, %d, %d)", &r, &g, &b)
	require.NoError(t, err, rgb)
	mix := func(v uint8) uint8 { return uint8(float64(v)*opacity + 255*(1-opacity) + 0.5) }
	return color.NRGBA{mix(r), mix(g), mix(b), 255}
}

// near reports whether a and b differ by at most 3 in each channel.
func near(a, b color.NRGBA) bool {
	d := func(x, y uint8) bool { return x-y <= 3 || y-x <= 3 }
	return a.A == b.A && d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B)
}

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
	"strconv"
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
// and one phase per event, 3 seconds apart, retried attempts of every coloured cause and of
// two causes that take the fallback colours in the seconds after each event, and, during
// the stall, every worker waiting on the stalled owner while no call fails.
func browserReport() *Report {
	causes := append(slices.Sorted(maps.Keys(causeColors)), "partition unavailable", "deadline exceeded")
	r := &Report{Nodes: 3, Workers: 16, Protocol: "binary", Duration: "20s",
		Phases: []PhaseReport{{Name: "steady", Retries: map[string]int{}, AttemptsAvg: 1}}}
	seconds := 3*len(kinds) + 3
	for i, k := range kinds {
		label := fmt.Sprintf("%s n%d", k, i%3+1)
		r.Events = append(r.Events, EventReport{Kind: k, Label: label, AtSec: float64(3*i + 2), TookMs: 40})
		r.Phases = append(r.Phases, PhaseReport{Name: label, StartSec: float64(3*i + 2), Retries: map[string]int{}, AttemptsAvg: 1.0015})
	}
	r.Total = PhaseReport{Name: "total", Retries: map[string]int{}, AttemptsAvg: 1.0013}
	stall := stallSeconds(r)
	for t := range seconds {
		s := Second{T: t, Ops: 25000 + 1000*(t%4), P99Ms: 4 + float64(t%5), Retries: map[string]int{}}
		if t >= 2 {
			for j, c := range causes {
				if (t+j)%3 != 0 {
					s.Retries[c] = 1 + (t+j)%4
					r.Phases[min((t-2)/3+1, len(r.Phases)-1)].Retries[c] += s.Retries[c]
					r.Total.Retries[c] += s.Retries[c]
				}
			}
		}
		if t%7 == 3 {
			s.Errors = 2
		}
		if slices.Contains(stall, t) {
			s.Ops, s.Waiting, s.Errors = 40, 16, 0
		}
		r.Timeline = append(r.Timeline, s)
	}
	return r
}

// stallSeconds are the whole seconds of r's timeline during its stall, which lasts 2 s.
func stallSeconds(r *Report) []int {
	for _, e := range r.Events {
		if e.Kind == Stall {
			return []int{int(e.AtSec), int(e.AtSec) + 1, int(e.AtSec) + 2}
		}
	}
	return nil
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

// probeBody is put last in the page's body: it reads the computed style and the box, in the
// page's pixels, of each chart's plot, series, axis labels, captions, legend entries and
// event markers, the tables' cells, the page's scripts and the resources it loaded, and
// writes them as JSON into a pre#zaris-probe element.
const probeBody = `<script>
(() => {
  const found = {};
  try {
    const box = el => {
      const b = el.getBoundingClientRect();
      return {x: b.left + scrollX, y: b.top + scrollY, w: b.width, h: b.height};
    };
    const style = el => {
      const s = getComputedStyle(el);
      return {fill: s.fill, stroke: s.stroke, strokeWidth: parseFloat(s.strokeWidth), fillOpacity: parseFloat(s.fillOpacity),
        opacity: parseFloat(s.opacity), display: s.display, visibility: s.visibility, ...box(el)};
    };
    const texts = (g, sel) => [...g.querySelectorAll(sel)].map(el => ({text: el.textContent, ...box(el)}));
    found.panels = [...document.querySelectorAll("svg g.panel")].map(g => ({
      metric: g.dataset.metric,
      plot: box(g.querySelector("rect.plot") || g.querySelector("line.axis")), // the x axis of a page without a plot box
      series: [...g.querySelectorAll(".series")].map(el => ({tag: el.tagName, cause: el.dataset.cause || "", name: el.dataset.series || "", ...style(el)})),
      yTicks: texts(g, "text.ytick"), xTicks: texts(g, "text.xtick"), units: texts(g, "text.unit"),
    }));
    found.captions = texts(document, "svg text.caption");
    found.legend = [...document.querySelectorAll("svg g.legend")].map(g => ({name: g.dataset.series, text: g.textContent, ...style(g.querySelector("rect"))}));
    found.events = [...document.querySelectorAll("svg g.event")].map(g => ({kind: g.dataset.event, label: g.querySelector("text").textContent, ...style(g.querySelector("line"))}));
    found.fontPx = Math.min(...[...document.querySelectorAll("svg text")].map(el => el.getBoundingClientRect().height).filter(h => h > 0));
    found.window = {w: innerWidth, h: innerHeight, scrollH: document.documentElement.scrollHeight};
    found.tables = [...document.querySelectorAll("table")].map(t => [...t.querySelectorAll("tr")].map(r => [...r.cells].map(c => c.textContent)));
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

// rect is an element's box in the page's pixels.
type rect struct{ X, Y, W, H float64 }

// overlaps reports whether a and b share some area.
func (a rect) overlaps(b rect) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// style is an element's computed style and box, as probeBody reports it.
type style struct {
	Fill, Stroke, Display, Visibility string
	StrokeWidth, FillOpacity, Opacity float64
	rect
}

// text is a text element's content and box.
type text struct {
	Text string
	rect
}

// probed is what probeBody found in the page.
type probed struct {
	Panels []struct {
		Metric string
		Plot   rect
		Series []struct {
			Tag, Cause, Name string
			style
		}
		YTicks, XTicks, Units []text
	}
	Captions []text
	Legend   []struct {
		Name, Text string
		style
	}
	Events []struct {
		Kind, Label string
		style
	}
	FontPx    float64
	Window    struct{ W, H, ScrollH float64 }
	Tables    [][][]string
	Scripts   int
	Resources []string
	Errors    []string
}

// visible reports whether s is shown at all.
func (s style) visible() bool {
	return s.Display != "none" && s.Visibility == "visible" && s.Opacity > 0
}

// probePage loads page (HTML) with the probe in the browser at path, in a window of size
// (a --window-size flag), and returns what the probe found and the browser's log lines of
// the page's console.
func probePage(t *testing.T, path, page, size string) (probed, []string) {
	t.Helper()
	require.Equal(t, 1, strings.Count(page, "<head>"), "the page has one <head>")
	require.Equal(t, 1, strings.Count(page, "</body>"), "the page has one </body>")
	page = strings.Replace(page, "<head>", "<head>\n"+probeHead, 1)
	page = strings.Replace(page, "</body>", probeBody+"\n</body>", 1)
	file := filepath.Join(t.TempDir(), "timeline.html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 2*browserTimeout)
	defer cancel()
	dom, log, err := runBrowser(ctx, path, file, "--dump-dom", size)
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
// table has a row per phase and the total, and the page raises no error, logs nothing,
// loads nothing and has no script of its own. The picture WriteScreenshot draws of it shows
// each band: the retries chart holds a band's worth of pixels of each cause's colour. Before
// the page's stylesheet painted the bands, its rule for the series (fill: none) left that
// chart empty. TestTimelineAtAGlance checks that it reads at a glance.
func TestTimelineInBrowser(t *testing.T) {
	path := requireBrowser(t)
	r := browserReport()
	var page bytes.Buffer
	require.NoError(t, writeTimeline(&page, r))
	found, console := probePage(t, path, page.String(), windowSize(r))

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
			what := p.Metric + " " + s.Tag + " " + s.Name
			assert.True(t, s.visible(), "%s is hidden: %+v", what, s.style)
			assert.Positive(t, s.W, "%s has no width", what)
			assert.Positive(t, s.H, "%s has no height", what)
			switch s.Tag {
			case "polygon":
				assert.NotEqual(t, "none", s.Fill, "%s is not filled", what)
				assert.Positive(t, s.FillOpacity, what)
				if p.Metric == "retries" {
					bandFill[s.Cause] = s.Fill
				}
			default:
				assert.Equal(t, "polyline", s.Tag)
				assert.NotEqual(t, "none", s.Stroke, "%s is not stroked", what)
				assert.Positive(t, s.StrokeWidth, what)
			}
		}
	}
	require.Equal(t, []string{"ops", "p99", "waiting", "retries"}, metrics, "the charts")
	assert.ElementsMatch(t, slices.Collect(maps.Keys(causes)), slices.Collect(maps.Keys(bandFill)), "a band per cause")

	legendFill := map[string]string{}
	for _, l := range found.Legend {
		assert.Equal(t, l.Name, l.Text)
		assert.True(t, l.visible() && l.W > 0 && l.H > 0, "the legend swatch of %s is not shown: %+v", l.Name, l.style)
		if causes[l.Name] {
			legendFill[l.Name] = l.Fill
		}
	}
	assert.Equal(t, bandFill, legendFill, "each band is filled in the colour its legend shows")
	for c, fill := range bandFill {
		if want, ok := causeColors[c]; ok {
			var r, g, b uint8
			_, err := fmt.Sscanf(want, "#%02x%02x%02x", &r, &g, &b)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("rgb(%d, %d, %d)", r, g, b), fill, "the band of %s has its colour", c)
		}
	}
	distinct := map[string]bool{}
	for _, f := range bandFill {
		distinct[f] = true
	}
	assert.Len(t, distinct, len(bandFill), "each cause has a colour of its own: %v", bandFill)

	plot := found.Panels[0].Plot
	require.Len(t, found.Events, len(r.Events), "a marker per churn event")
	for i, e := range r.Events {
		m := found.Events[i]
		assert.Equal(t, string(e.Kind), m.Kind)
		assert.Equal(t, e.Label, m.Label)
		assert.True(t, m.visible() && m.Stroke != "none" && m.H > 0, "the marker of %s is not drawn: %+v", e.Label, m.style)
		assert.True(t, m.X >= plot.X-1 && m.X <= plot.X+plot.W+1, "the marker of %s at x=%v is outside the plot %+v", e.Label, m.X, plot)
	}

	var phases []string
	for _, p := range append(slices.Clone(r.Phases), r.Total) {
		phases = append(phases, p.Name)
	}
	require.NotEmpty(t, found.Tables)
	var first []string
	for _, row := range found.Tables[0][1:] {
		first = append(first, row[0])
	}
	assert.Equal(t, phases, first, "a table row per phase, and the total")

	dir := t.TempDir()
	require.NoError(t, r.writeFiles(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 2*browserTimeout)
	defer cancel()
	shot, err := WriteScreenshot(ctx, r, dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "timeline.png"), shot)
	img := readPNG(t, shot)
	retries := found.Panels[len(found.Panels)-1]
	for _, s := range retries.Series {
		if s.Fill == "none" {
			continue // not painted, as the checks above said
		}
		// Over a thousand pixels: a band of browserReport has about ten thousand, an
		// antialiased line a few hundred.
		n := pixelsOf(t, img, inside(retries.Plot), overWhite(t, s.Fill, s.FillOpacity))
		assert.Greater(t, n, 1000, "pixels of %s's colour %s at opacity %v in the retries chart of the picture", s.Cause, s.Fill, s.FillOpacity)
	}
}

// The timeline page reads at a glance, at 1400 px (the picture's width) and from 1000 to
// 2000 px: its charts span at least 85% of the window, every chart has a y axis with three
// or more labelled values and its unit and a time axis, no caption (a chart's title, a
// legend entry, an event's label) overlaps a data path, the legend names each series once
// and no name holds another (as "Moved" and "owner moved" did), the events are named as the
// table's phases, attempts per call have four decimals, the table has a column per retry
// cause, and during the stall the picture shows the calls waiting. The page of a fixed 960
// px, with only 0 and the maximum on each axis and the captions inside the plots, failed
// each of these.
func TestTimelineAtAGlance(t *testing.T) {
	path := requireBrowser(t)
	r := browserReport()
	var page bytes.Buffer
	require.NoError(t, writeTimeline(&page, r))
	for _, width := range []int{1000, screenshotWidth, 2000} {
		found, _ := probePage(t, path, page.String(), windowSizeAt(r, width))
		at := fmt.Sprintf("at %d px", width)
		require.NotEmpty(t, found.Panels, at)
		for _, p := range found.Panels {
			assert.GreaterOrEqual(t, p.Plot.W, 0.85*found.Window.W, "%s: chart %s spans %.0f px of %.0f", at, p.Metric, p.Plot.W, found.Window.W)
		}
		assert.GreaterOrEqual(t, found.FontPx, 9.0, "%s: the smallest text is %.1f px high", at, found.FontPx)
		if width != screenshotWidth {
			continue
		}

		for _, p := range found.Panels {
			labels := map[string]bool{}
			for _, l := range p.YTicks {
				labels[l.Text] = true
			}
			assert.GreaterOrEqual(t, len(labels), 3, "chart %s: labelled values on its y axis: %v", p.Metric, p.YTicks)
			require.Len(t, p.Units, 1, "chart %s has its unit", p.Metric)
			assert.NotEmpty(t, p.Units[0].Text, "chart %s has its unit", p.Metric)
			assert.GreaterOrEqual(t, len(p.XTicks), 3, "chart %s has a time axis", p.Metric)
			for _, tick := range p.XTicks {
				assert.Regexp(t, `^\d+s$`, tick.Text, "chart %s: a time", p.Metric)
			}
		}
		require.NotEmpty(t, found.Captions)
		for _, c := range found.Captions {
			for _, p := range found.Panels {
				for _, s := range p.Series {
					assert.False(t, c.overlaps(s.rect), "caption %q %+v overlaps %s's %s %+v", c.Text, c.rect, p.Metric, s.Name, s.rect)
				}
			}
		}
		var names []string
		for _, l := range found.Legend {
			names = append(names, l.Text)
		}
		for i, a := range names {
			for j, b := range names {
				assert.False(t, i != j && strings.Contains(strings.ToLower(b), strings.ToLower(a)), "legend names %q and %q", a, b)
			}
		}
		require.NotEmpty(t, found.Tables)
		table := found.Tables[0]
		for i, e := range found.Events {
			require.Greater(t, len(table), i+2)
			assert.Equal(t, table[i+2][0], e.Label, "event %d is named as its phase", i)
		}
		assert.Contains(t, table[2], "1.0015", "attempts per call, with four decimals")
		require.Len(t, found.Tables, 2, "the phases, and their retried attempts")
		header := found.Tables[1][0]
		for c, n := range r.Total.Retries {
			i := slices.Index(header, c)
			if assert.Positive(t, i, "a column for the retries that saw %s: %q", c, header) {
				total := found.Tables[1][len(found.Tables[1])-1]
				assert.Equal(t, []string{"total", strconv.Itoa(n)}, []string{total[0], total[i]}, c)
			}
		}

		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "timeline.html"), page.Bytes(), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), 2*browserTimeout)
		shot, err := WriteScreenshot(ctx, r, dir)
		cancel()
		require.NoError(t, err)
		var waiting *style
		for i := range found.Panels {
			for j := range found.Panels[i].Series {
				if s := &found.Panels[i].Series[j]; s.Tag == "polygon" && found.Panels[i].Metric == "waiting" {
					waiting = &s.style
				}
			}
		}
		require.NotNil(t, waiting, "a band of the calls waiting")
		var panel rect
		for _, p := range found.Panels {
			if p.Metric == "waiting" {
				panel = p.Plot
			}
		}
		stall := stallSeconds(r)
		perSecond := panel.W / float64(len(r.Timeline)-1)
		during := image.Rect(int(panel.X+perSecond*float64(stall[0])), int(panel.Y)+2, int(panel.X+perSecond*float64(stall[len(stall)-1])), int(panel.Y+panel.H)-2)
		n := pixelsOf(t, readPNG(t, shot), during, overWhite(t, waiting.Fill, waiting.FillOpacity))
		assert.Greater(t, n, during.Dx()*during.Dy()/4, "pixels of the waiting band (%s at %v) during the stall, in %v", waiting.Fill, waiting.FillOpacity, during)
	}
}

// readPNG decodes the picture in file.
func readPNG(t *testing.T, file string) image.Image {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	return img
}

// inside is the part of r two pixels in from its edges, in whole pixels.
func inside(r rect) image.Rectangle {
	return image.Rect(int(r.X)+2, int(r.Y)+2, int(r.X+r.W)-2, int(r.Y+r.H)-2)
}

// pixelsOf counts the pixels of img in area that are near want.
func pixelsOf(t *testing.T, img image.Image, area image.Rectangle, want color.NRGBA) int {
	t.Helper()
	require.True(t, area.In(img.Bounds()), "%v is in the picture %v", area, img.Bounds())
	n := 0
	for y := area.Min.Y; y < area.Max.Y; y++ {
		for x := area.Min.X; x < area.Max.X; x++ {
			if near(color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA), want) {
				n++
			}
		}
	}
	return n
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

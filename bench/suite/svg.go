package suite

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// Charts of a report as standalone SVG (no dependency: a few rectangles, lines and labels).

// WriteGemvSVG draws one bar per GEMV shape, type and thread count, then one per shape, type
// and kernel variant of the one-thread section: the % of the same-run streaming-read
// bandwidth the GEMV reads its weights at (100% = the machine's limit).
func (r *Report) WriteGemvSVG(w io.Writer) error {
	var bars []bar
	for _, g := range r.Gemv.Rows {
		bars = append(bars, bar{label: fmt.Sprintf("%s %s %dt", g.Shape, g.Type, g.Threads), value: g.PctBW,
			group: fmt.Sprintf("%s, %d thread(s)", g.Type, g.Threads)})
	}
	for _, g := range r.Gemv.Types {
		bars = append(bars, bar{label: fmt.Sprintf("%s %s %s 1t", g.Shape, g.Type, g.Variant), value: g.PctBW,
			group: fmt.Sprintf("%s kernels, 1 thread, by type", g.Variant)})
	}
	return barChart(w, "GEMV weight read speed, % of this run's streaming-read bandwidth", "% of bandwidth", bars, 100)
}

// WriteModelSVG draws decode and prefill tokens/s against the thread count, one line per
// model.
func (r *Report) WriteModelSVG(w io.Writer) error {
	var series []line
	for _, m := range r.Models {
		dec, pre := line{name: m.Name + " decode (tg)"}, line{name: m.Name + " prefill (pp), /10"}
		for _, run := range m.Runs {
			dec.pts = append(dec.pts, [2]float64{float64(run.Threads), run.DecodeTokS})
			pre.pts = append(pre.pts, [2]float64{float64(run.Threads), run.PrefillTokS / 10})
		}
		series = append(series, dec, pre)
	}
	return lineChart(w, "Whole model: tokens/s vs threads (prefill divided by 10)", "threads", "tokens/s", series)
}

type bar struct {
	label, group string
	value        float64
}

type line struct {
	name string
	pts  [][2]float64
}

var palette = []string{"#4878d0", "#ee854a", "#6acc64", "#d65f5f", "#956cb4", "#8c613c", "#dc7ec0", "#797979"}

func svgHead(b *strings.Builder, width, height int, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="14" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
}

// barChart draws horizontal bars, coloured by group, with a reference line at ref.
func barChart(w io.Writer, title, unit string, bars []bar, ref float64) error {
	const left, right, rowH, top = 240, 80, 16, 40
	width := 900
	height := top + rowH*len(bars) + 50
	maxV := ref
	for _, b := range bars {
		maxV = math.Max(maxV, b.value)
	}
	maxV *= 1.05
	colors := map[string]string{}
	var groups []string
	for _, b := range bars {
		if _, ok := colors[b.group]; !ok {
			colors[b.group] = palette[len(colors)%len(palette)]
			groups = append(groups, b.group)
		}
	}
	scale := float64(width-left-right) / maxV
	var s strings.Builder
	svgHead(&s, width, height, title)
	for i, b := range bars {
		y := top + i*rowH
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end">%s</text>`, left-6, y+11, html.EscapeString(b.label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, left, y+2, math.Max(0, b.value)*scale, rowH-4, colors[b.group])
		fmt.Fprintf(&s, `<text x="%.1f" y="%d">%.0f</text>`+"\n", float64(left)+math.Max(0, b.value)*scale+4, y+11, b.value)
	}
	x := float64(left) + ref*scale
	fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>`, x, top, x, top+rowH*len(bars))
	fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">%g %s</text>`+"\n", x, top+rowH*len(bars)+14, ref, html.EscapeString(unit))
	for i, g := range groups {
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+i*160, height-16, colors[g], left+i*160+14, height-7, html.EscapeString(g))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

// lineChart draws series of points with linear axes from 0.
func lineChart(w io.Writer, title, xunit, yunit string, series []line) error {
	const width, height, left, bottom, top, right = 720, 420, 70, 60, 40, 220
	maxX, maxY := 1.0, 1.0
	for _, l := range series {
		for _, p := range l.pts {
			maxX, maxY = math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	maxY *= 1.1
	px := func(x float64) float64 { return left + x/maxX*float64(width-left-right) }
	py := func(y float64) float64 { return float64(height-bottom) - y/maxY*float64(height-bottom-top) }
	var s strings.Builder
	svgHead(&s, width, height, title)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n",
		left, height-bottom, width-right, height-bottom, left, top, left, height-bottom)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`, left-4, py(y)+4, y)
	}
	ticks := map[float64]bool{}
	for _, l := range series {
		for _, p := range l.pts {
			ticks[p[0]] = true
		}
	}
	var xs []float64
	for x := range ticks {
		xs = append(xs, x)
	}
	sort.Float64s(xs)
	for _, x := range xs {
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`, px(x), height-bottom+14, x)
	}
	fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, (left+width-right)/2, height-bottom+32, html.EscapeString(xunit))
	fmt.Fprintf(&s, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`+"\n", (top+height-bottom)/2, (top+height-bottom)/2, html.EscapeString(yunit))
	for i, l := range series {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range l.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, px(p[0]), py(p[1]), c)
		}
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+10, top+i*18, c, width-right+24, top+i*18+9, html.EscapeString(l.name))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

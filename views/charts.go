package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Charts are drawn on the server as inline SVG: no script, no external library, nothing for the
// Content-Security-Policy to block. Colours come from classes in app.css, so they follow the
// colour scheme; every bar carries a <title> with its numbers, and the chart a text summary.

// ChartSeries is one stacked series: the key counted in buckets, its label and colour class.
type ChartSeries struct {
	Key   string
	Label string
	Class string
	Total int64
}

// ChartBucket is one bar's data: the start of its hour and the counts by series key.
type ChartBucket struct {
	Start  time.Time
	Counts map[string]int64
}

// Chart is a stacked bar chart ready to draw.
type Chart struct {
	ID      string
	Title   string
	Unit    string // what is counted, plural: "attempts"
	Summary string
	Empty   bool
	Series  []ChartSeries
	Bars    []ChartBar
	Ticks   []ChartTick
	Max     string
}

// ChartBar is one stacked bar.
type ChartBar struct {
	Title    string
	Segments []ChartRect
}

// ChartRect is one segment of a bar, in SVG user units.
type ChartRect struct {
	X, Y, Width, Height string
	Class               string
}

// ChartTick is a label on the time axis.
type ChartTick struct {
	X    string
	Text string
}

// The chart's geometry, in SVG user units (the viewBox scales to the page's width).
const (
	chartWidth  = 720
	chartHeight = 196
	plotLeft    = 44
	plotRight   = 712
	plotTop     = 12
	plotBottom  = 168
)

// ChartViewBox is the viewBox of every chart.
var ChartViewBox = fmt.Sprintf("0 0 %d %d", chartWidth, chartHeight)

// NewChart lays out buckets (oldest first) as bars stacked by series, in the order of series.
// Counts under keys not in series are added to the last series, so nothing is left out.
func NewChart(id, title, unit string, series []ChartSeries, buckets []ChartBucket) Chart {
	c := Chart{ID: id, Title: title, Unit: unit, Series: append([]ChartSeries(nil), series...)}
	index := map[string]int{}
	for i, s := range c.Series {
		index[s.Key] = i
	}
	rows := make([][]int64, len(buckets))
	var peak, total int64
	for b, bucket := range buckets {
		rows[b] = make([]int64, len(c.Series))
		var sum int64
		for key, n := range bucket.Counts {
			i, ok := index[key]
			if !ok {
				i = len(c.Series) - 1
			}
			rows[b][i] += n
			c.Series[i].Total += n
			sum += n
		}
		peak, total = max(peak, sum), total+sum
	}
	c.Empty = total == 0
	c.Max = strconv.FormatInt(peak, 10)
	c.Summary = chartSummary(c, total)
	slot := float64(plotRight-plotLeft) / float64(max(len(buckets), 1))
	scale := float64(plotBottom-plotTop) / float64(max(peak, 1))
	for b, bucket := range buckets {
		x := plotLeft + float64(b)*slot + slot*0.15
		bar := ChartBar{Title: barTitle(bucket.Start, c.Series, rows[b], unit)}
		y := float64(plotBottom)
		for i, n := range rows[b] {
			if n == 0 {
				continue
			}
			h := float64(n) * scale
			y -= h
			bar.Segments = append(bar.Segments, ChartRect{X: num(x), Y: num(y), Width: num(slot * 0.7), Height: num(h),
				Class: "chart__bar " + c.Series[i].Class})
		}
		c.Bars = append(c.Bars, bar)
		if bucket.Start.Hour()%6 == 0 {
			c.Ticks = append(c.Ticks, ChartTick{X: num(x + slot*0.35), Text: bucket.Start.UTC().Format("15:04")})
		}
	}
	return c
}

func chartSummary(c Chart, total int64) string {
	if total == 0 {
		return "No " + c.Unit + " in the last 24 hours."
	}
	parts := make([]string, 0, len(c.Series))
	for _, s := range c.Series {
		if s.Total > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", s.Total, s.Label))
		}
	}
	return fmt.Sprintf("%d %s in the last 24 hours: %s.", total, c.Unit, strings.Join(parts, ", "))
}

func barTitle(start time.Time, series []ChartSeries, counts []int64, unit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s–%s UTC", start.UTC().Format("15:04"), start.UTC().Add(time.Hour).Format("15:04"))
	var sum int64
	for i, n := range counts {
		if n > 0 {
			fmt.Fprintf(&b, "\n%s: %d", series[i].Label, n)
		}
		sum += n
	}
	if sum == 0 {
		b.WriteString("\nno " + unit)
	}
	return b.String()
}

// Axis positions, as strings for the templates.
var (
	chartPlotLeft   = num(plotLeft)
	chartPlotRight  = num(plotRight)
	chartPlotTop    = num(plotTop)
	chartPlotBottom = num(plotBottom)
	chartTickY      = num(plotBottom + 20)
	chartLabelX     = num(plotLeft - 6)
	chartMaxY       = num(plotTop + 4)
	chartZeroY      = num(plotBottom + 4)
)

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

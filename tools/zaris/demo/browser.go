package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Browser is the program the demo draws timeline.png with, and the page's browser test
// loads the page in: headless Chromium (Debian's chromium package), found on PATH.
const Browser = "chromium"

// ErrNoBrowser is returned by WriteScreenshot when Browser is not on PATH.
var ErrNoBrowser = errors.New(Browser + " not found on PATH (apt-get install chromium)")

// browserTimeout bounds one run of the browser, generously: it starts slowly on a busy
// machine.
const browserTimeout = 2 * time.Minute

// browserFlags run the browser headless, as root too, with no network of its own (no
// updates, sync, extensions or first-run pages), in the profile directory given after them.
var browserFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-extensions", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
}

// browserMu lets one browser process run at a time.
var browserMu sync.Mutex

// findBrowser returns the path of Browser, or ErrNoBrowser.
func findBrowser() (string, error) {
	path, err := exec.LookPath(Browser)
	if err != nil {
		return "", ErrNoBrowser
	}
	return path, nil
}

// runBrowser runs the browser at path once, headless in a new empty profile, with args
// after browserFlags and the file page last, and returns what it wrote to stdout and to
// stderr (its log, where the page's console messages appear as INFO:CONSOLE lines).
func runBrowser(ctx context.Context, path string, page string, args ...string) (stdout, stderr []byte, err error) {
	browserMu.Lock()
	defer browserMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	profile, err := os.MkdirTemp("", "zaris-chromium-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(profile)
	abs, err := filepath.Abs(page)
	if err != nil {
		return nil, nil, err
	}
	all := append(append(append([]string{}, browserFlags...), "--user-data-dir="+profile), args...)
	cmd := exec.CommandContext(ctx, path, append(all, (&url.URL{Scheme: "file", Path: abs}).String())...)
	inOwnProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Run(); err != nil {
		return out.Bytes(), log.Bytes(), fmt.Errorf("%s %s: %w (within %s); its log ends:\n%s", Browser, strings.Join(args, " "), err, browserTimeout, tail(log.String(), 10))
	}
	return out.Bytes(), log.Bytes(), nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// WriteScreenshot draws dir/timeline.html, the page of report r, with Browser into
// dir/timeline.png and returns that path. It returns ErrNoBrowser when there is no browser.
func WriteScreenshot(ctx context.Context, r *Report, dir string) (string, error) {
	path, err := findBrowser()
	if err != nil {
		return "", err
	}
	page := filepath.Join(dir, "timeline.html")
	shot := filepath.Join(dir, "timeline.png")
	abs, err := filepath.Abs(shot)
	if err != nil {
		return "", err
	}
	if _, _, err := runBrowser(ctx, path, page, "--screenshot="+abs, windowSize(r)); err != nil {
		return "", err
	}
	if err := cropPNG(shot, 32); err != nil {
		return "", fmt.Errorf("cropping %s: %w", shot, err)
	}
	return shot, nil
}

// screenshotWidth is the width of the window the demo draws timeline.png in.
const screenshotWidth = 1400

// windowSize is the browser's --window-size for the page of report r: screenshotWidth wide
// and taller than the page (a heading, the charts scaled to the window's width, and a table
// row or two per phase), so that a screenshot, cropped to what the page drew, shows all of it.
func windowSize(r *Report) string {
	return windowSizeAt(r, screenshotWidth)
}

// windowSizeAt is windowSize for a window width pixels wide.
func windowSizeAt(r *Report, width int) string {
	chart := float64(markerTop+4*panelHeight+6*legendRow) * float64(width) / chartWidth
	return fmt.Sprintf("--window-size=%d,%d", width, 400+int(chart)+40*(len(r.Phases)+2))
}

// cropPNG cuts the blank (white) right and bottom of the picture in file, leaving margin
// pixels past what was drawn.
func cropPNG(file string, margin int) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return err
	}
	b := img.Bounds()
	right, bottom := b.Min.X, b.Min.Y
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA); c != (color.NRGBA{255, 255, 255, 255}) {
				right, bottom = max(right, x+1), max(bottom, y+1)
			}
		}
	}
	crop := image.Rect(b.Min.X, b.Min.Y, min(b.Max.X, right+margin), min(b.Max.Y, bottom+margin))
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok || crop == b {
		return nil
	}
	var out bytes.Buffer
	if err := png.Encode(&out, sub.SubImage(crop)); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}

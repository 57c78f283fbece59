package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file that exists, and every #anchor a heading (or an <a id>) of its
// file, so the reference split over docs/ stays one document to follow.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	explicit := regexp.MustCompile(`<a id="([^"]+)">`)
	fence := regexp.MustCompile("(?s)```.*?```")
	slug := func(h string) string {
		h = strings.ToLower(strings.TrimSpace(h))
		h = regexp.MustCompile("[`*_]").ReplaceAllString(h, "")
		h = regexp.MustCompile(`[^\p{L}\p{N}\- ]`).ReplaceAllString(h, "")
		return strings.ReplaceAll(h, " ", "-")
	}
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		texts[f] = text
		set := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(text, -1) {
			set[slug(m[1])] = true
		}
		for _, m := range explicit.FindAllStringSubmatch(text, -1) {
			set[m[1]] = true
		}
		anchors[filepath.Clean(f)] = set
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		for _, m := range link.FindAllStringSubmatch(texts[f], -1) {
			url := m[1]
			if strings.Contains(url, "://") || strings.HasPrefix(url, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(url, "#")
			target := filepath.Clean(f)
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link to %s: no such file", f, url)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if set, ok := anchors[target]; ok && !set[anchor] {
				t.Errorf("%s: link to %s: no heading #%s in %s", f, url, anchor, target)
			}
		}
	}
}

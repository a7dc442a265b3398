package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every golden block of the README and docs/ quotes its golden file
// exactly (under -update the blocks are rewritten from the files). At
// least one block exists, so the test cannot pass by finding none.
func TestDocsMatchGoldens(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range docs {
		text, err := os.ReadFile(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Blocks(d, text)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.File)))
			if err != nil {
				t.Errorf("%s:%d: %v", b.Doc, b.Line, err)
				continue
			}
			checked++
			if b.Body != string(data) && !Update() {
				t.Errorf("%s:%d: block differs from %s (go test ./internal/golden -update copies the file in):\n%s",
					b.Doc, b.Line, b.File, Diff(string(data), b.Body))
			}
		}
		if Update() {
			err := Rewrite(root, d, func(b Block) ([]byte, bool) {
				data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.File)))
				return data, err == nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no golden block in the README or docs/")
	}
}

func TestBlocks(t *testing.T) {
	doc := "intro naming `<!-- golden PATH -->` in a line\n<!-- golden a/x.golden -->\n```\nout 1\nout 2\n```\n<!-- /golden -->\nmid\n" +
		"<!-- golden b/t.md -->\n| a | b |\n|---|---|\n<!-- /golden -->\nend\n"
	bs, err := Blocks("d.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 {
		t.Fatalf("%d blocks, want 2", len(bs))
	}
	if b := bs[0]; b.File != "a/x.golden" || !b.Fenced || b.Body != "out 1\nout 2\n" || b.Line != 2 {
		t.Fatalf("first block %+v", b)
	}
	if b := bs[1]; b.File != "b/t.md" || b.Fenced || b.Body != "| a | b |\n|---|---|\n" || b.Line != 9 {
		t.Fatalf("second block %+v", b)
	}
	for _, bad := range []string{
		"<!-- golden a/x.golden -->\nno end\n",
		"<!-- golden -->\n<!-- /golden -->\n",
		"<!-- golden a b -->\n<!-- /golden -->\n",
		"<!-- golden a -->\n<!-- golden b -->\n<!-- /golden -->\n",
	} {
		if _, err := Blocks("d.md", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A block inside a list item is indented like its markers: the indent is
// not part of the content, and a rewrite puts it back.
func TestIndentedBlock(t *testing.T) {
	doc := "- item\n\n  <!-- golden t.md -->\n  | a |\n  |---|\n  <!-- /golden -->\n"
	bs, err := Blocks("d.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Body != "| a |\n|---|\n" || bs[0].Indent != "  " {
		t.Fatalf("blocks %+v", bs)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "d.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(root, "d.md", func(Block) ([]byte, bool) { return []byte("| b |\n|---|\n"), true }); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "d.md"))
	if want := strings.Replace(doc, "| a |", "| b |", 1); string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := Blocks("d.md", []byte("  <!-- golden t.md -->\n| a |\n  <!-- /golden -->\n")); err == nil {
		t.Fatal("a line less indented than the marker: no error")
	}
}

func TestRewrite(t *testing.T) {
	root := t.TempDir()
	doc := "x\n<!-- golden f.txt -->\n```\nold\n```\n<!-- /golden -->\n<!-- golden g.md -->\nkeep\n<!-- /golden -->\n"
	if err := os.WriteFile(filepath.Join(root, "d.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Rewrite(root, "d.md", func(b Block) ([]byte, bool) { return []byte("new 1\nnew 2\n"), b.File == "f.txt" })
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "d.md"))
	want := strings.Replace(doc, "old\n", "new 1\nnew 2\n", 1)
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

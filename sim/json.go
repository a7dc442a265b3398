package sim

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// WriteJSON writes one JSON object per row, one per line.
func (r *Results) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, row := range r.Rows {
		b, err := row.MarshalJSON()
		if err != nil {
			return err
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteJSONFile writes the JSON rows to DIR/<experiment>.jsonl.
func (r *Results) WriteJSONFile(dir string) (string, error) {
	name := filepath.Join(dir, r.Experiment+".jsonl")
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return "", err
	}
	return name, f.Close()
}

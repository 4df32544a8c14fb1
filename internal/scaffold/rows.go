package scaffold

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxRows is how many rows of a --rows file become golden examples.
const MaxRows = 5

// maxRowBytes bounds what ReadRows reads of the file.
const maxRowBytes = 1 << 20

// ReadRows reads the header and the first MaxRows rows of a CSV file
// (read at most 1 MiB of it) and makes each a golden example of m: a
// field's value is the column of its name (the artifact's or the field
// name sluice init gives it); a category field made of pandas.get_dummies
// columns takes its column, or the level whose dummy column is 1. The
// examples' outputs are left 0, for the caller to compute by running the
// artifact. file names the file in messages.
func ReadRows(file string, r io.Reader, m *Model) ([]Golden, error) {
	cr := csv.NewReader(io.LimitReader(r, maxRowBytes))
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("--rows %s: read the header: %w", file, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	var out []Golden
	for line := 2; len(out) < MaxRows; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("--rows %s: %w", file, err)
		}
		g := Golden{Expect: make([]float64, len(m.Outputs))}
		for i, f := range m.Fields {
			v, err := rowValue(f, i, col, rec)
			if err != nil {
				return nil, fmt.Errorf("--rows %s line %d: %w", file, line, err)
			}
			g.Instance = append(g.Instance, Value{Field: f.Name, Value: v})
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--rows %s: no row under the header", file)
	}
	return out, nil
}

func rowValue(f Field, i int, col map[string]int, rec []string) (any, error) {
	cell := func(name string) (string, bool) {
		k, ok := col[name]
		if !ok {
			k, ok = col[FieldName(name, "f"+strconv.Itoa(i))]
		}
		if !ok || k >= len(rec) {
			return "", false
		}
		return strings.TrimSpace(rec[k]), true
	}
	s, ok := cell(f.Name)
	if !ok && f.Type == "category" && f.Encode == "onehot" {
		for _, v := range f.Values {
			if d, ok := cell(f.Name + "_" + v); ok && (d == "1" || strings.EqualFold(d, "true") || d == "1.0") {
				return v, nil
			}
		}
		return nil, fmt.Errorf("field %s: no column %q, and none of its dummy columns %s_… is 1", f.Name, f.Name, f.Name)
	}
	if !ok {
		return nil, fmt.Errorf("no column %q for field %s (the header names the artifact's features)", f.Name, f.Name)
	}
	switch f.Type {
	case "category":
		for _, v := range f.Values {
			if v == s {
				return v, nil
			}
		}
		return nil, fmt.Errorf("field %s: %q is not one of its values %v", f.Name, s, f.Values)
	case "bool":
		b, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil {
			if x, ferr := strconv.ParseFloat(s, 64); ferr == nil && (x == 0 || x == 1) {
				return x == 1, nil
			}
			return nil, fmt.Errorf("field %s: %q is not a bool", f.Name, s)
		}
		return b, nil
	case "int":
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x != float64(int64(x)) {
			return nil, fmt.Errorf("field %s: %q is not an integer", f.Name, s)
		}
		return int64(x), nil
	case "float":
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("field %s: %q is not a number", f.Name, s)
		}
		return x, nil
	}
	return nil, fmt.Errorf("field %s: type %s cannot be read from a CSV cell", f.Name, f.Type)
}

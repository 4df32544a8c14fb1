package hosting

import (
	"fmt"
	"strings"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
)

// CheckFieldOrder compares the columns the package's schema produces
// (after preprocessing, in order) with the names the artifact declares
// for the columns it reads (info.FeatureNames), and refuses a mismatch:
// fields in another order than the artifact's give wrong predictions that
// look right. Without names in the artifact there is nothing to compare
// (FieldOrderWarning says so). The messages say where the package's
// runtime keeps the names (runtime.FeatureNamer).
//
// A column matches a name when they are equal once case and punctuation
// are set aside ("petal length (cm)" is petal_length_cm) and a
// scikit-learn ColumnTransformer prefix ("num__age") is dropped: a plain
// column by its field's name, a one-hot column by field and level
// ("color_red" or "color=red", as pandas.get_dummies and scikit-learn's
// OneHotEncoder name them); and any column by its feature name as the
// schema prints it ("standardize(age)", as scikit-learn artifacts
// exported by Sluice's script name them).
func CheckFieldOrder(spec *modelpkg.Spec, info runtime.Info) error {
	names := info.FeatureNames
	if len(names) == 0 || spec.Schema.Width() == 0 {
		return nil
	}
	help, _ := featureNamesHelp(spec.Manifest.Runtime)
	var cols []column
	for _, c := range spec.Schema.FeatureColumns() {
		cols = append(cols, column{FeatureColumn: c})
	}
	where := help.Where
	if where == "" {
		where = "the artifact's feature names"
	}
	if len(names) != len(cols) {
		return fmt.Errorf("the artifact declares %d feature names (%s: %s) but the schema produces %d columns after preprocessing (%s)",
			len(names), where, listNames(names), len(cols), listNames(spec.Schema.Features()))
	}
	feats := spec.Schema.Features()
	for i := range cols {
		cols[i].feature = feats[i]
	}
	first := -1
	for i, n := range names {
		if !columnMatches(cols[i], n) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	return fmt.Errorf("the schema's field order is not the artifact's: the model reads %s [%s] but input.fields and preprocess give [%s]; column %d is %q in the artifact and %q in the schema, so the model would read one feature's values as another's. %s",
		where, listNames(names), listNames(feats), first, names[first], feats[first], fieldOrderFix(spec, cols, names))
}

// fieldOrderFix says how to make the schema match names: the fields in
// the artifact's order when every name is one of the schema's columns,
// else the renames the unmatched columns need.
func fieldOrderFix(spec *modelpkg.Spec, cols []column, names []string) string {
	var order []string
	seen := map[string]bool{}
	var unmatched []string
	for _, n := range names {
		found := ""
		for _, c := range cols {
			if columnMatches(c, n) {
				found = c.Field
				break
			}
		}
		if found == "" {
			unmatched = append(unmatched, n)
			continue
		}
		if !seen[found] {
			seen[found] = true
			order = append(order, found)
		}
	}
	if len(unmatched) == 0 && len(order) == spec.Schema.NumFields() {
		fix := "Fix: list input.fields in the artifact's order: " + listNames(order)
		for _, c := range cols {
			if c.Level != "" {
				return fix + " (one-hot levels in the order of the field's values)"
			}
		}
		return fix
	}
	var renames []string
	for i, n := range names {
		if !columnMatches(cols[i], n) && len(renames) < 8 {
			renames = append(renames, fmt.Sprintf("column %d %q (field %s) is %q in the artifact", i, spec.Schema.Features()[i], cols[i].Field, n))
		}
	}
	return fmt.Sprintf("Fix: order and name input.fields as the artifact does (sluice init DIR writes them from the artifact); %s", strings.Join(renames, "; "))
}

// column is one of the schema's columns with its feature name.
type column struct {
	schema.FeatureColumn
	feature string // schema.Features()[i]
}

// columnMatches says whether artifact feature name n names column c.
func columnMatches(c column, n string) bool {
	// Sluice's own name of the column ("standardize(age)", "color=red"),
	// as the scikit-learn exporter writes featureNames.
	if n == c.feature {
		return true
	}
	want := nameKey(c.Field)
	if c.Level != "" {
		want = nameKey(c.Field + "_" + c.Level)
	}
	if nameKey(n) == want {
		return true
	}
	// scikit-learn's ColumnTransformer prefixes its outputs with the
	// transformer's name: "num__age", "cat__color_red".
	if i := strings.Index(n, "__"); i > 0 && nameKey(n[i+2:]) == want {
		return true
	}
	return false
}

// nameKey folds a name to lower case ASCII letters and digits separated
// by single '_': "Petal Length (cm)" and petal_length_cm are one key.
func nameKey(s string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(s) {
		// Anything else separates, as scaffold.FieldName replaces it (a
		// field name is ASCII: "âge" is field ge, key ge).
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(r)
			continue
		}
		sep = true
	}
	return b.String()
}

// FieldOrderWarning is the warning for a package whose artifact could
// declare its feature names (its runtime is a runtime.FeatureNamer) but
// does not: the order of its fields cannot be checked. "" otherwise.
func FieldOrderWarning(spec *modelpkg.Spec, info runtime.Info) string {
	if len(info.FeatureNames) > 0 || spec.Schema.Width() == 0 {
		return ""
	}
	help, ok := featureNamesHelp(spec.Manifest.Runtime)
	if !ok {
		return ""
	}
	return fmt.Sprintf("the artifact declares no feature names (%s), so the order of input.fields cannot be checked against the columns the model was trained on; to add them: %s", help.Where, help.Add)
}

// featureNamesHelp is the runtime's help on feature names, if its
// artifacts can declare them.
func featureNamesHelp(runtimeName string) (runtime.FeatureNamesHelp, bool) {
	rt, err := runtime.Lookup(runtimeName)
	if err != nil {
		return runtime.FeatureNamesHelp{}, false
	}
	fn, ok := rt.(runtime.FeatureNamer)
	if !ok {
		return runtime.FeatureNamesHelp{}, false
	}
	return fn.FeatureNamesHelp(), true
}

// listNames joins names for a message, at most 32 of them.
func listNames(names []string) string {
	const most = 32
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(names[:most], ", "), len(names)-most)
}

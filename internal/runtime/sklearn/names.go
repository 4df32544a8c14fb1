package sklearn

import "github.com/sluiceml/sluice/internal/runtime"

// FeatureNamesHelp says where an exported scikit-learn model keeps the
// names of its columns (featureNames, from feature_names_in_) and how to
// add them.
func (Runtime) FeatureNamesHelp() runtime.FeatureNamesHelp {
	return runtime.FeatureNamesHelp{
		Where: "scikit-learn feature_names_in_ (the export's featureNames)",
		Add:   "fit the estimator or pipeline on a pandas DataFrame (its column names become feature_names_in_), then export it again with scripts/sluice_export_sklearn.py",
	}
}

package xgboost

import "github.com/sluiceml/sluice/internal/runtime"

// FeatureNamesHelp says where an XGBoost model keeps the names of its
// columns (learner.feature_names, Info.FeatureNames) and how to add them.
func (Runtime) FeatureNamesHelp() runtime.FeatureNamesHelp {
	return runtime.FeatureNamesHelp{
		Where: "XGBoost feature_names",
		Add:   "train on a pandas DataFrame (its column names become feature_names), or set booster.feature_names = [...] in the order of the training columns before booster.save_model",
	}
}

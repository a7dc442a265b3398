package verbs

// ConfigError is a transport core's Config field out of range. Both cores
// report their Validate errors as one, so that each front end (profiles,
// experiment files) turns any core's error into its own key with one
// piece of code.
type ConfigError struct {
	// Core names the transport ("metaroce", "rocev2").
	Core string
	// Field is the Go name of the field, dotted into nested structs
	// ("DCQCN.G"): the key its `key` tag gives is what a front end shows.
	Field string
	// Msg is what is wrong, without the field's name.
	Msg string
}

func (e *ConfigError) Error() string { return e.Core + ": config " + e.Field + " " + e.Msg }

package emf

// ValidateEMF exposes the test validator to the package's external tests.
var ValidateEMF = validateEMF

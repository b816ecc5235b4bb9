// Package doccheck has no code of its own: its tests keep the Markdown
// documentation true to the repository. Every relative link and anchor
// resolves, the README's figures are the lab's, and the README's local
// development program is the one the tests build and run.
package doccheck

package redis

// ClockSlack is how much longer than its logical lifetime every key lives
// with a simulated clock.
const ClockSlack = clockSlack

// ScriptNames maps the SHA of every registered script to its name, for the
// conformance test's check that the suite runs each of them.
func ScriptNames() map[string]string {
	m := make(map[string]string, len(allScripts))
	for _, sc := range allScripts {
		m[sc.Hash()] = sc.name
	}
	return m
}

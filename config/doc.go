// Package config holds the configuration of the two daemons, mqbroker and mqnamesrv.
//
// Each daemon has one struct (Broker, Namesrv) whose `prop` struct tags are RocketMQ's own
// property key names, so an existing broker.properties works unchanged. Defaults live in one
// constructor (NewBroker, NewNamesrv); values derived from other keys (haListenPort,
// storePathCommitLog, brokerIP2, ...) are filled in by Normalize; Validate reports every bad
// key by name.
//
// Loading order, later wins:
//
//  1. defaults (NewBroker / NewNamesrv);
//  2. the .properties file named by -c/--config (parsed by github.com/magiconair/properties,
//     UTF-8, no ${} expansion);
//  3. command-line flags: -n/--namesrvAddr (broker) and a generated --<key>=<value> flag for
//     every tagged field (e.g. --listenPort 30911, --storePathRootDir /tmp/x,
//     --autoCreateTopicEnable=false).
//
// Keys are case-sensitive, as in RocketMQ. An unknown key in a file is not fatal: it is returned
// as a warning for the caller to log, naming the closest known key (RocketMQ silently ignores
// such keys); with strictConfig=true it is an error. An unknown flag is always an error. A value that does not
// parse is an error that names the key and the value, e.g. `brokerId: invalid integer "x"`.
// Durations are integers in milliseconds, as in RocketMQ; the helpers (FlushInterval, ...) turn
// them into time.Duration.
//
// Tag syntax: `prop:"<key>"` names the key; an optional `alias:"<k1>,<k2>"` lists other
// spellings accepted for the same field (RocketMQ renamed a few keys between versions, e.g.
// mapedFileSizeCommitLog → mappedFileSizeCommitLog). `help:"..."` is the flag's one-line
// meaning, `group:"..."` starts a --help section (identity, network, store, messages, dledger,
// ha, proxy, security, operations; the following fields stay in it until the next group tag),
// and `unit:"..."` is stated in errors about the value (keys ending in Ms/Millis/Sec/MB get
// theirs from the name). Fields without a prop tag are not configurable.
package config

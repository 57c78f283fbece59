package codec

// PlainTopic exposes plainTopic to the external tests.
var PlainTopic = plainTopic

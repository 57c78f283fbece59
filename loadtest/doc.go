// Package loadtest is xmq's load generator: scenarios, workers, histograms
// and reports. It dials through listeners.Dial, so it targets every
// transport the broker speaks, and encodes with codec, so it needs no
// third-party MQTT library; it never imports core, so it measures any MQTT
// broker the same way.
//
// Contract:
//
//   - Options describes a run; Run executes it here or split over agents
//     (Config.Agents) and returns a Report with one CaseResult per case
//     (per connection level in conn mode, per payload size otherwise).
//     Prepare and Worker.Start are the two halves of one worker's share,
//     which an agent runs for the controller.
//   - Each simulated connection has one read loop and one write loop, like
//     the broker's. The read loop never writes: it appends the acks it owes
//     to a queue and wakes the write loop, which batches them with its
//     publishes in one buffered write and flushes when it has nothing more
//     to send. Publishing and receiving allocate nothing per message.
//   - Every payload starts with a 16-byte header: send time, publisher
//     number and sequence number. Receivers time each message and track
//     each publisher's sequence for loss, duplicates and reordering.
//   - Latencies go into log-linear histograms (HdrHistogram style, 0.8 %
//     buckets). A Recorder takes concurrent records; a Histogram merges
//     exactly, so agents' results combine without averaging percentiles.
//   - Counters a loop owns are read only after the loop has ended; the live
//     progress and per-second series read atomic mirrors.
//   - Config.Stop (the first Ctrl-C) ends the publishing phase of the case
//     in progress as its duration would (Worker.Stop): it drains and is
//     reported; Options.Duration 0 publishes until then.
//   - Reports: WriteText, WriteMarkdown, WriteJSON (which ReadReport reads
//     back, histograms included) and WriteHTML; WriteCompareText and
//     WriteCompareHTML put several reports side by side (chart.go draws
//     the SVG).
//
// The conn mode keeps each held connection as a bare net.Conn with no
// goroutine or buffer, so the generator's footprint stays well below the
// broker's and the figure measured is the broker's.
package loadtest

#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# throttle.pl RATE FILE: FILE to stdout at RATE bytes/s from its first byte,
# in 64 KiB chunks (what a remote GET at that bandwidth would give). pv -L
# lets the first tenth of a second's bytes through at once, so it does not
# slow shards smaller than RATE/10 at all; perl starts in ~3 ms.
use strict;
use warnings;
use Time::HiRes qw(time sleep);
my ($rate, $path) = @ARGV;
open(my $in, '<:raw', $path) or die "throttle.pl: $path: $!\n";
binmode STDOUT;
my ($start, $sent, $chunk) = (time, 0, '');
while ((my $got = sysread($in, $chunk, 65536)) > 0) {
    $sent += $got;
    my $wait = $start + $sent / $rate - time;
    sleep($wait) if $wait > 0;
    my $off = 0;
    while ($off < $got) {
        my $put = syswrite(STDOUT, $chunk, $got - $off, $off);
        exit 0 unless defined $put;  # the reader left (EPIPE)
        $off += $put;
    }
}

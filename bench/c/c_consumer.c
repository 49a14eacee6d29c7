//  c_consumer SUB PUB TOPIC COUNT RESET TIMEOUT_MS  (the driver bench/c_reference.py names)
//  Runs dafka_consumer, reads COUNT records (gives up after TIMEOUT_MS of silence) and prints
//  "consumed COUNT FIRST_US LAST_US CPU_S" (microseconds since its creation).
#include <dafka.h>
#include <sys/resource.h>

static double cpu_s (void) {
    struct rusage u; getrusage (RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main (int argc, char *argv []) {
    if (argc != 7) { fprintf (stderr, "usage: c_consumer SUB PUB TOPIC COUNT RESET TIMEOUT_MS\n"); return 2; }
    zsys_set_sndhwm (1000000);
    zsys_set_rcvhwm (1000000);
    zsys_set_linger (0);
    long count = atol (argv [4]);
    int timeout = atoi (argv [6]);
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "beacon/sub_address", argv [1]);
    zconfig_put (config, "beacon/pub_address", argv [2]);
    zconfig_put (config, "beacon/address", "127.0.0.1");
    zconfig_put (config, "consumer/offset/reset", argv [5]);
    int64_t start = zclock_usecs ();
    dafka_consumer_args_t args = { .config = config };
    dafka_consumer_t *consumer = dafka_consumer_new (&args);
    assert (consumer);
    int rc = dafka_consumer_subscribe (consumer, argv [3]);
    assert (rc == 0);
    printf ("ready\n"); fflush (stdout);
    zsock_set_rcvtimeo (dafka_consumer_record_source (consumer), timeout);
    dafka_consumer_msg_t *msg = dafka_consumer_msg_new ();
    long n = 0;
    int64_t first = 0, last = 0;
    while (n < count) {
        if (dafka_consumer_msg_recv (msg, consumer) == -1)
            break;
        last = zclock_usecs () - start;
        if (n == 0) first = last;
        n++;
    }
    printf ("consumed %ld %lld %lld %.3f\n", n, (long long) first, (long long) last, cpu_s ());
    fflush (stdout);
    dafka_consumer_msg_destroy (&msg);
    dafka_consumer_destroy (&consumer);
    zconfig_destroy (&config);
    return n == count ? 0 : 1;
}

//  c_producer SUB PUB TOPIC COUNT SIZE WARMUP_MS  (a driver bench/c_reference.py names)
//  Starts dafka_producer, sleeps WARMUP_MS (the stores connect), prints "ready", publishes
//  COUNT records of SIZE bytes (the last filled with 'E'), destroys the producer (the C
//  producer ends only once every record is ACKed) and prints
//  "produced COUNT PUBLISH_US TOTAL_US CPU_S" (microseconds from the first send).
#include <dafka.h>
#include <sys/resource.h>

static double cpu_s (void) {
    struct rusage u; getrusage (RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main (int argc, char *argv []) {
    if (argc != 7) { fprintf (stderr, "usage: c_producer SUB PUB TOPIC COUNT SIZE WARMUP_MS\n"); return 2; }
    zsys_set_sndhwm (1000000);
    zsys_set_rcvhwm (1000000);
    zsys_set_pipehwm (1000000);
    zsys_set_linger (0);
    long count = atol (argv [4]);
    size_t size = (size_t) atol (argv [5]);
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "beacon/sub_address", argv [1]);
    zconfig_put (config, "beacon/pub_address", argv [2]);
    zconfig_put (config, "beacon/address", "127.0.0.1");
    dafka_producer_args_t args = { argv [3], config };
    zactor_t *producer = zactor_new (dafka_producer, &args);
    assert (producer);
    zclock_sleep (atoi (argv [6]));
    printf ("ready\n"); fflush (stdout);
    byte *payload = (byte *) malloc (size > 0 ? size : 1);
    memset (payload, 'x', size);
    dafka_producer_msg_t *msg = dafka_producer_msg_new ();
    double cpu = cpu_s ();
    int64_t start = zclock_usecs ();
    for (long i = 0; i < count; i++) {
        if (i == count - 1)
            memset (payload, 'E', size);
        dafka_producer_msg_set_content_buffer (msg, payload, size);
        dafka_producer_msg_send (msg, producer);
    }
    int64_t published = zclock_usecs () - start;
    zactor_destroy (&producer);  //  returns once every record is ACKed
    int64_t total = zclock_usecs () - start;
    printf ("produced %ld %lld %lld %.3f\n", count, (long long) published, (long long) total,
            cpu_s () - cpu);
    fflush (stdout);
    dafka_producer_msg_destroy (&msg);
    free (payload);
    zconfig_destroy (&config);
    return 0;
}

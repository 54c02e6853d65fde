int b_fn(void);
int a_fn(void) { return 1; }
int a_use(void) { return b_fn(); }

int a_fn(void);
int b_fn(void) { return a_fn(); }

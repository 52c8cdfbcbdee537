/** The part of jStat (it ships no types) that `bench arms` uses for its significance figures. */
declare module 'jstat' {
  interface JStat {
    readonly studentt: {
      /** P(T ≤ x) for Student's t with `dof` degrees of freedom. */
      cdf(x: number, dof: number): number;
      /** The x with P(T ≤ x) = p. */
      inv(p: number, dof: number): number;
    };
    readonly binomial: {
      /** P(X ≤ k) for X ~ Binomial(n, p). */
      cdf(k: number, n: number, p: number): number;
    };
  }
  const jStat: JStat;
  export default jStat;
}

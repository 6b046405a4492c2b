package esbperf.console;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import net.grinder.common.Test;
import net.grinder.console.model.ModelTestIndex;
import net.grinder.console.model.SampleModel;
import net.grinder.console.model.SampleModelViews;
import net.grinder.statistics.ExpressionView;
import net.grinder.statistics.StatisticExpression;
import net.grinder.statistics.StatisticsSet;
import net.grinder.statistics.StatisticsView;

/** /recording/*: the console's sample model (what the Swing console shows in its tables). */
final class Recording {

  private final SampleModel model;
  private final SampleModelViews views;
  private volatile ModelTestIndex index = new ModelTestIndex();

  Recording(SampleModel model, SampleModelViews views) {
    this.model = model;
    this.views = views;
    model.addModelListener(new SampleModel.AbstractListener() {
      @Override
      public void newTests(Set<Test> newTests, ModelTestIndex modelTestIndex) {
        index = modelTestIndex;
      }

      @Override
      public void resetTests() {
        index = new ModelTestIndex();
      }
    });
  }

  Map<String, Object> status() {
    final SampleModel.State s = model.getState();
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("state", s.getValue().toString());
    m.put("description", s.getDescription());
    if (s.getValue() == SampleModel.State.Value.IgnoringInitialSamples
        || s.getValue() == SampleModel.State.Value.Recording) {
      m.put("sample-count", s.getSampleCount());
    }
    return m;
  }

  Object start() {
    model.start();
    return status();
  }

  Object stop() {
    model.stop();
    return status();
  }

  Object zero() {
    model.zeroStatistics();
    return status();
  }

  Object reset() {
    model.reset();
    return status();
  }

  /** Columns, per-test and total statistics: cumulative, or the last sample if {@code latest}. */
  Object data(boolean latest) {
    final ModelTestIndex testIndex = index;
    final StatisticsView view = latest
        ? views.getIntervalStatisticsView() : views.getCumulativeStatisticsView();
    final ExpressionView[] columns = view.getExpressionViews();

    final List<String> names = new ArrayList<>();
    for (ExpressionView c : columns) {
      names.add(c.getDisplayName());
    }
    final List<Object> tests = new ArrayList<>();
    for (int i = 0; i < testIndex.getNumberOfTests(); i++) {
      final Test test = testIndex.getTest(i);
      final Map<String, Object> t = new LinkedHashMap<>();
      t.put("test", test.getNumber());
      t.put("description", test.getDescription());
      t.put("statistics", values(columns, latest
          ? testIndex.getLastSampleStatistics(i) : testIndex.getCumulativeStatistics(i)));
      tests.add(t);
    }
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("status", status());
    m.put("columns", names);
    m.put("tests", tests);
    m.put("totals", values(columns, latest
        ? model.getTotalLatestStatistics() : model.getTotalCumulativeStatistics()));
    return m;
  }

  private static List<Object> values(ExpressionView[] columns, StatisticsSet statistics) {
    final List<Object> out = new ArrayList<>();
    for (ExpressionView c : columns) {
      final StatisticExpression e = c.getExpression();
      if (e.isDouble()) {
        final double d = e.getDoubleValue(statistics);
        out.add(Double.isFinite(d) ? d : null);   // JSON has no NaN: "no value yet" is null
      }
      else {
        out.add(e.getLongValue(statistics));
      }
    }
    return out;
  }
}
